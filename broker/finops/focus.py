"""FinOps FOCUS 1.2 cost and usage rows for stored placements, pure.

One row per placement node pool (plus its storage and inter-site egress) per
charge period (a UTC day), for the hours in which the placement was current.
Column names and data types follow the FOCUS 1.2 specification; columns this
broker adds are prefixed `x_` as the specification asks.

Modelling choices (see docs/finops.md):
- Catalog prices are effective hourly rates, so BilledCost = EffectiveCost
  (reservations billed hourly as a no-upfront commitment would be).
- ListUnitPrice is the public on-demand list price of the node type at the site
  (as the provider's feed gave it, before any negotiated discount rule), and
  ListCost = ListUnitPrice x PricingQuantity: ListCost - EffectiveCost is every
  discount (negotiated, spot, commitment) together.
- Contracted prices include negotiated discounts and exclude commitment discounts
  (FOCUS 1.2): on a committed (reserved) row ContractedUnitPrice is the node type's
  on-demand price at the negotiated rate, so ContractedCost - EffectiveCost is what
  the commitment saves; elsewhere they equal the price paid.
- PricingCategory: ondemand -> Standard, spot -> Dynamic, reserved -> Committed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from broker.finops.ledger import LedgerEntry, LedgerItem

FOCUS_VERSION = "1.2"

# (column, FOCUS data type). Types: String, Decimal, DateTime, JSON (a key-value object as text).
FOCUS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("AvailabilityZone", "String"),
    ("BilledCost", "Decimal"),
    ("BillingAccountId", "String"),
    ("BillingAccountName", "String"),
    ("BillingAccountType", "String"),
    ("BillingCurrency", "String"),
    ("BillingPeriodEnd", "DateTime"),
    ("BillingPeriodStart", "DateTime"),
    ("CapacityReservationId", "String"),
    ("CapacityReservationStatus", "String"),
    ("ChargeCategory", "String"),
    ("ChargeClass", "String"),
    ("ChargeDescription", "String"),
    ("ChargeFrequency", "String"),
    ("ChargePeriodEnd", "DateTime"),
    ("ChargePeriodStart", "DateTime"),
    ("CommitmentDiscountCategory", "String"),
    ("CommitmentDiscountId", "String"),
    ("CommitmentDiscountName", "String"),
    ("CommitmentDiscountQuantity", "Decimal"),
    ("CommitmentDiscountStatus", "String"),
    ("CommitmentDiscountType", "String"),
    ("CommitmentDiscountUnit", "String"),
    ("ConsumedQuantity", "Decimal"),
    ("ConsumedUnit", "String"),
    ("ContractedCost", "Decimal"),
    ("ContractedUnitPrice", "Decimal"),
    ("EffectiveCost", "Decimal"),
    ("InvoiceId", "String"),
    ("InvoiceIssuerName", "String"),
    ("ListCost", "Decimal"),
    ("ListUnitPrice", "Decimal"),
    ("PricingCategory", "String"),
    ("PricingCurrency", "String"),
    ("PricingQuantity", "Decimal"),
    ("PricingUnit", "String"),
    ("ProviderName", "String"),
    ("PublisherName", "String"),
    ("RegionId", "String"),
    ("RegionName", "String"),
    ("ResourceId", "String"),
    ("ResourceName", "String"),
    ("ResourceType", "String"),
    ("ServiceCategory", "String"),
    ("ServiceName", "String"),
    ("ServiceSubcategory", "String"),
    ("SkuId", "String"),
    ("SkuMeter", "String"),
    ("SkuPriceDetails", "JSON"),
    ("SkuPriceId", "String"),
    ("SubAccountId", "String"),
    ("SubAccountName", "String"),
    ("SubAccountType", "String"),
    ("Tags", "JSON"),
    ("x_PlacementId", "String"),
    ("x_PlacementName", "String"),
    ("x_Tenant", "String"),
    ("x_BaselineCost", "Decimal"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(c for c, _ in FOCUS_COLUMNS)

CHARGE_CATEGORIES = frozenset({"Usage", "Purchase", "Tax", "Credit", "Adjustment"})
PRICING_CATEGORIES = frozenset({"Standard", "Dynamic", "Committed", "Other"})
PRICING_CATEGORY = {"ondemand": "Standard", "spot": "Dynamic", "reserved": "Committed"}

_PROVIDER = {
    "aws": "AWS",
    "azure": "Microsoft",
    "gcp": "Google Cloud",
    "private": "Private data centre",
    "edge": "Edge site",
}
_COMPUTE_SERVICE = {
    "aws": "Amazon Elastic Compute Cloud",
    "azure": "Virtual Machines",
    "gcp": "Compute Engine",
}
_STORAGE_SERVICE = {"aws": "Amazon Elastic Block Store", "azure": "Managed Disks", "gcp": "Persistent Disk"}

_Q = Decimal("0.0000000001")  # FOCUS decimals: 10 fractional digits are ample for USD per hour


def dec(x: float) -> Decimal:
    return Decimal(repr(x)).quantize(_Q)


def charge_periods(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    """UTC days covering [start, end), clipped to it."""
    day = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    while day < end:
        nxt = day + timedelta(days=1)
        yield max(day, start), min(nxt, end)
        day = nxt


def billing_period(t: datetime) -> tuple[datetime, datetime]:
    """The calendar month (UTC) containing t."""
    first = t.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)
    return first, nxt


class _Resource:
    """One billable resource of a placement: a node pool, a site's storage, or egress."""

    def __init__(self, kind: str, key: str) -> None:
        self.kind = kind
        self.key = key
        self.items: list[LedgerItem] = []

    @property
    def cost_per_hour(self) -> float:
        return sum(i.cost_per_hour for i in self.items)

    @property
    def baseline_per_hour(self) -> float:
        return sum(i.baseline_cost_per_hour for i in self.items)


def _resources(items: Iterable[LedgerItem]) -> dict[str, list[_Resource]]:
    out: dict[str, dict[tuple[str, str], _Resource]] = defaultdict(dict)
    for it in items:
        key = it.pool if it.kind == "compute" else (it.site or "") if it.kind == "storage" else ""
        res = out[it.placement_id].setdefault((it.kind, key or ""), _Resource(it.kind, key or ""))
        res.items.append(it)
    return {pid: list(v.values()) for pid, v in out.items()}


def focus_rows(
    entries: Sequence[LedgerEntry],
    items: Iterable[LedgerItem],
    *,
    start: datetime,
    end: datetime,
    billing_account: str = "placement-broker",
) -> list[dict[str, Any]]:
    """FOCUS rows for every placement current during [start, end), one per resource per UTC day."""
    by_placement = _resources(items)
    periods = list(charge_periods(start, end))
    rows: list[dict[str, Any]] = []
    for e in sorted(entries, key=lambda e: (e.created_at, e.placement_id)):
        resources = by_placement.get(e.placement_id, [])
        if not resources:
            continue
        # a resource's row is the same every day but for the period and the hour-scaled amounts,
        # so build it once per resource (at one hour) and scale it per day
        templates: list[dict[str, Any]] | None = None
        for p_start, p_end in periods:
            hours = e.active_hours(p_start, p_end)
            if hours <= 0:
                continue
            if templates is None:
                egress_by = _egress_provider(resources)
                templates = [_row(e, res, p_start, p_end, 1.0, billing_account, egress_by) for res in resources]
            h = Decimal(repr(hours))
            bill_start, bill_end = billing_period(p_start)
            for t in templates:
                row = dict(t)
                for k in _HOURLY:
                    if row[k] is not None:
                        row[k] = (t[k] * h).quantize(_Q)
                row.update(
                    ChargePeriodStart=p_start,
                    ChargePeriodEnd=p_end,
                    BillingPeriodStart=bill_start,
                    BillingPeriodEnd=bill_end,
                )
                rows.append(row)
    return rows


# amounts proportional to the hours a placement was current in the charge period
_HOURLY = (
    "BilledCost", "EffectiveCost", "ContractedCost", "ListCost", "PricingQuantity", "ConsumedQuantity",
    "CommitmentDiscountQuantity", "x_BaselineCost",
)  # fmt: skip


def _egress_provider(resources: Sequence[_Resource]) -> str:
    """Who bills a placement's inter-site transfer: the one provider all its sites belong to,
    else several."""
    providers = {i.provider for r in resources if r.kind != "egress" for i in r.items}
    return _PROVIDER.get(next(iter(providers)), next(iter(providers))) if len(providers) == 1 else "Multiple providers"


# names in a row's workloads tag: the largest placements' nodes hold 100,000s of workloads, whose
# names in one field overflow CSV readers' field limits (Python's csv: 128 KiB)
TAG_WORKLOADS = 100


def _names(workloads: list[str]) -> str:
    if len(workloads) <= TAG_WORKLOADS:
        return ",".join(workloads)
    return ",".join(workloads[:TAG_WORKLOADS]) + f",... ({len(workloads) - TAG_WORKLOADS} more)"


def _row(
    e: LedgerEntry,
    res: _Resource,
    p_start: datetime,
    p_end: datetime,
    hours: float,
    account: str,
    egress_by: str = "Multiple providers",
) -> dict[str, Any]:
    first = res.items[0]
    provider_key = first.provider
    provider = _PROVIDER.get(provider_key, provider_key)
    workloads = sorted({i.workload for i in res.items})
    teams = sorted({i.team for i in res.items})
    cost = dec(res.cost_per_hour * hours)
    bill_start, bill_end = billing_period(p_start)
    tags = {"broker/placement": e.name, "broker/tenant": e.tenant, "broker/workloads": _names(workloads)}
    if teams:
        tags["team"] = ",".join(teams)
    row: dict[str, Any] = dict.fromkeys(COLUMN_NAMES)
    row.update(
        BilledCost=cost,
        EffectiveCost=cost,
        ContractedCost=cost,
        BillingAccountId=account,
        BillingAccountName=account,
        BillingAccountType="Broker account",
        BillingCurrency="USD",
        PricingCurrency="USD",
        BillingPeriodStart=bill_start,
        BillingPeriodEnd=bill_end,
        ChargePeriodStart=p_start,
        ChargePeriodEnd=p_end,
        ChargeCategory="Usage",
        ChargeFrequency="Usage-Based",
        SubAccountId=e.tenant,
        SubAccountName=e.tenant,
        SubAccountType="Tenant",
        Tags=json.dumps(tags, sort_keys=True),
        x_PlacementId=e.placement_id,
        x_PlacementName=e.name,
        x_Tenant=e.tenant,
        x_BaselineCost=dec(res.baseline_per_hour * hours),
        InvoiceIssuerName=provider,
        ProviderName=provider,
        PublisherName=provider,
    )
    if res.kind == "compute":
        _compute_columns(row, e, res, hours, provider_key)
    elif res.kind == "storage":
        site = res.key
        qty = sum(i.quantity for i in res.items)
        region = site.split(":", 1)[1] if ":" in site else site
        unit_price = res.cost_per_hour / qty if qty > 0 else 0.0
        row.update(
            ChargeDescription=f"Block storage for {', '.join(workloads)} at {site}",
            PricingCategory="Standard",
            PricingQuantity=dec(qty * hours),
            PricingUnit="GiB-Hours",
            ConsumedQuantity=dec(qty * hours),
            ConsumedUnit="GiB-Hours",
            ListUnitPrice=dec(unit_price),
            ContractedUnitPrice=dec(unit_price),
            ListCost=cost,
            RegionId=region,
            RegionName=region,
            ResourceId=f"{e.placement_id}/{site}/storage",
            ResourceName=f"{e.name} storage at {site}",
            ResourceType="Block storage",
            ServiceCategory="Storage",
            ServiceSubcategory="Block Storage",
            ServiceName=_STORAGE_SERVICE.get(provider_key, "Block storage"),
            SkuId=f"{provider_key}:block-storage",
            SkuPriceId=f"{site}/block-storage",
            SkuMeter="Storage",
        )
    else:
        row.update(
            ChargeDescription=f"Inter-site data transfer between the workloads of {e.name}",
            PricingCategory="Standard",
            PricingQuantity=dec(hours),
            PricingUnit="Hours",
            ConsumedQuantity=dec(hours),
            ConsumedUnit="Hours",
            ListUnitPrice=dec(res.cost_per_hour),
            ContractedUnitPrice=dec(res.cost_per_hour),
            ListCost=cost,
            ResourceId=f"{e.placement_id}/egress",
            ResourceName=f"{e.name} inter-site egress",
            ResourceType="Data transfer",
            ServiceCategory="Networking",
            ServiceSubcategory="Network Connectivity",
            ServiceName="Data Transfer",
            SkuId="inter-site-egress",
            SkuPriceId="inter-site-egress",
            SkuMeter="Data Transfer",
            ProviderName=egress_by,
            PublisherName=egress_by,
            InvoiceIssuerName=egress_by,
        )
    return row


def _compute_columns(row: dict[str, Any], e: LedgerEntry, res: _Resource, hours: float, provider: str) -> None:
    pool = res.key
    site, instance_type, capacity = pool.rsplit("/", 2)
    region = site.split(":", 1)[1] if ":" in site else site
    first = res.items[0]
    nodes = first.quantity
    unit = first.unit_price_per_hour
    listed = max(first.list_unit_price_per_hour, unit)  # a list price is never below the price paid
    # the same node on demand at the negotiated rate (items recorded before it was kept: the list price)
    negotiated = first.contracted_unit_price_per_hour
    contracted_ondemand = min(listed, max(negotiated, unit)) if negotiated is not None else listed
    category = PRICING_CATEGORY.get(capacity, "Other")
    row.update(
        ChargeDescription=f"{int(nodes)} x {instance_type} ({capacity}) at {site} for {e.name}",
        PricingCategory=category,
        PricingQuantity=dec(nodes * hours),
        PricingUnit="Hours",
        ConsumedQuantity=dec(nodes * hours),
        ConsumedUnit="Hours",
        ListUnitPrice=dec(listed),
        ListCost=dec(listed * nodes * hours),
        ContractedUnitPrice=dec(unit),
        RegionId=region,
        RegionName=region,
        ResourceId=f"{e.placement_id}/{pool}",
        ResourceName=f"{e.name}: {pool}",
        ResourceType="Virtual Machine" if provider in _COMPUTE_SERVICE else "Node",
        ServiceCategory="Compute",
        ServiceSubcategory="Virtual Machines",
        ServiceName=_COMPUTE_SERVICE.get(provider, f"{_PROVIDER.get(provider, provider)} nodes"),
        SkuId=f"{provider}:{instance_type}",
        SkuPriceId=pool,
        SkuMeter="Compute Usage",
        SkuPriceDetails=json.dumps({"InstanceType": instance_type, "CapacityType": capacity}),
    )
    if category == "Committed":
        # the price the contract gives without the commitment: the same node on demand
        row.update(
            ContractedUnitPrice=dec(contracted_ondemand), ContractedCost=dec(contracted_ondemand * nodes * hours)
        )
        row.update(
            CommitmentDiscountId=pool,
            CommitmentDiscountName=f"{instance_type} reserved at {site}",
            CommitmentDiscountCategory="Usage",
            CommitmentDiscountType="Reserved capacity" if provider in _COMPUTE_SERVICE else "Owned capacity",
            CommitmentDiscountStatus="Used",
            CommitmentDiscountQuantity=dec(nodes * hours),
            CommitmentDiscountUnit="Hours",
        )
