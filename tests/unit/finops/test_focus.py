"""FOCUS 1.2 rows: column names and types of the specification, one row per resource per day."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from broker.core.domain import NodeAllocation
from broker.finops.focus import (
    CHARGE_CATEGORIES,
    COLUMN_NAMES,
    FOCUS_COLUMNS,
    PRICING_CATEGORIES,
    charge_periods,
    focus_rows,
)
from broker.finops.focus_io import focus_schema, to_csv, to_parquet
from broker.finops.ledger import LedgerEntry, entry_from_placement, items_from_placement
from tests.placements import assignment, placement

T0 = datetime(2026, 11, 30, 18, tzinfo=UTC)

# FOCUS 1.2 columns that a cost and usage dataset must carry (Mandatory), with their data types
FOCUS_12_MANDATORY = {
    "BilledCost": "Decimal", "BillingAccountId": "String", "BillingAccountName": "String",
    "BillingCurrency": "String", "BillingPeriodEnd": "DateTime", "BillingPeriodStart": "DateTime",
    "ChargeCategory": "String", "ChargeClass": "String", "ChargeDescription": "String",
    "ChargePeriodEnd": "DateTime", "ChargePeriodStart": "DateTime", "ContractedCost": "Decimal",
    "EffectiveCost": "Decimal", "InvoiceIssuerName": "String", "ListCost": "Decimal",
    "PricingQuantity": "Decimal", "PricingUnit": "String", "ProviderName": "String", "PublisherName": "String",
    "ServiceCategory": "String", "ServiceName": "String", "SkuId": "String", "SkuPriceId": "String",
    "Tags": "JSON", "PricingCategory": "String", "RegionId": "String", "ResourceId": "String",
    "ConsumedQuantity": "Decimal", "ConsumedUnit": "String", "ListUnitPrice": "Decimal",
    "ContractedUnitPrice": "Decimal",
}  # fmt: skip
ARROW = {"Decimal": pa.types.is_decimal, "String": pa.types.is_string, "JSON": pa.types.is_string,
         "DateTime": pa.types.is_timestamp}  # fmt: skip

REQUEST = {"workloads": [{"name": "a", "labels": {"team": "web"}}, {"name": "b", "storage_gib": 50}]}
PLACEMENT = placement(
    [
        assignment("a", "aws:eu-central-1/m6i.xlarge/spot", 4, 0.4, breakdown={"compute": 0.4, "storage": 0.0}),
        assignment("b", "azure:westeurope/D4s/ondemand", 1, 0.3, breakdown={"compute": 0.2, "storage": 0.1}),
        assignment("b", "private:fra-dc1/r740/reserved", 1, 0.2, breakdown={"compute": 0.2, "storage": 0.0}),
    ],
    nodes=[
        ("aws:eu-central-1/m6i.xlarge/spot", 2, 0.4),
        ("azure:westeurope/D4s/ondemand", 1, 0.2),
        ("private:fra-dc1/r740/reserved", 1, 0.2),
    ],
    request=REQUEST,
    cost_per_hour=1.0,
    baseline_cost_per_hour=2.0,
    egress_cost_per_hour=0.1,
    id="pl_1",
    tenant="acme",
    name="svc",
    created_at=T0,
)


def _rows(hours: float = 30.0) -> tuple[LedgerEntry, list[dict[str, object]]]:
    e = entry_from_placement(PLACEMENT)
    items = items_from_placement(e, PLACEMENT, lambda p: 0.5 if "m6i" in p else None)
    return e, focus_rows([e], items, start=T0 - timedelta(days=1), end=T0 + timedelta(hours=hours))


def test_every_mandatory_focus_12_column_is_there_with_its_type() -> None:
    declared = dict(FOCUS_COLUMNS)
    for name, kind in FOCUS_12_MANDATORY.items():
        assert declared.get(name) == kind, name
    extra = [c for c in COLUMN_NAMES if c not in FOCUS_12_MANDATORY]
    # anything not in the specification must carry the x_ prefix
    known_optional = {"AvailabilityZone", "BillingAccountType", "CapacityReservationId", "CapacityReservationStatus",
                      "ChargeFrequency", "CommitmentDiscountCategory", "CommitmentDiscountId",
                      "CommitmentDiscountName", "CommitmentDiscountQuantity", "CommitmentDiscountStatus",
                      "CommitmentDiscountType", "CommitmentDiscountUnit", "InvoiceId", "PricingCurrency",
                      "RegionName", "ResourceName", "ResourceType", "ServiceSubcategory", "SkuMeter",
                      "SkuPriceDetails", "SubAccountId", "SubAccountName", "SubAccountType"}  # fmt: skip
    assert all(c in known_optional or c.startswith("x_") for c in extra)


def test_one_row_per_resource_per_charge_period_and_costs_add_up() -> None:
    _e, rows = _rows(hours=30.0)  # 6 h on Nov 30, 24 h on Dec 1, 0 h on Dec 2 (window ends at 00:00)
    resources = {r["ResourceId"] for r in rows}
    # three node pools, storage at one site, egress
    assert len(resources) == 5
    days = sorted({r["ChargePeriodStart"] for r in rows})
    assert days == [datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)]
    assert len(rows) == 5 * 2
    total = sum(Decimal(r["BilledCost"]) for r in rows)  # type: ignore[arg-type]
    assert float(total) == pytest.approx((0.4 + 0.2 + 0.2 + 0.1 + 0.1) * 30, abs=1e-6)
    for r in rows:
        assert r["ChargePeriodEnd"] > r["ChargePeriodStart"]  # type: ignore[operator]
        assert r["BillingPeriodStart"] <= r["ChargePeriodStart"] < r["BillingPeriodEnd"]  # type: ignore[operator]
        assert r["ChargeCategory"] in CHARGE_CATEGORIES
        assert r["PricingCategory"] in PRICING_CATEGORIES
        assert r["EffectiveCost"] == r["BilledCost"]
        assert r["ListCost"] >= r["EffectiveCost"]  # type: ignore[operator]
        json.loads(str(r["Tags"]))
    dec1 = [r for r in rows if r["ChargePeriodStart"] == datetime(2026, 12, 1, tzinfo=UTC)]
    assert {r["BillingPeriodStart"] for r in dec1} == {datetime(2026, 12, 1, tzinfo=UTC)}


def test_egress_is_billed_by_the_one_provider_of_its_sites() -> None:
    _e, rows = _rows()
    several = {r["ProviderName"] for r in rows if r["ResourceId"] == "pl_1/egress"}
    assert several == {"Multiple providers"}  # AWS, Azure and a private site
    gcp_only = placement(
        [
            assignment("a", "gcp:europe-west1/n2-standard-2/spot", 2, 0.2),
            assignment("b", "gcp:europe-west4/n2-standard-2/ondemand", 1, 0.3),
        ],
        nodes=[("gcp:europe-west1/n2-standard-2/spot", 1, 0.2), ("gcp:europe-west4/n2-standard-2/ondemand", 1, 0.3)],
        request={"workloads": [{"name": "a"}, {"name": "b"}]},
        cost_per_hour=0.6,
        egress_cost_per_hour=0.1,
        id="pl_2",
        created_at=T0,
    )
    e = entry_from_placement(gcp_only)
    items = items_from_placement(e, gcp_only, lambda p: None)
    rows = focus_rows([e], items, start=T0, end=T0 + timedelta(hours=2))
    names = {r["ResourceId"]: r["ProviderName"] for r in rows}
    assert names["pl_2/egress"] == names["pl_2/gcp:europe-west1/n2-standard-2/spot"] == "Google Cloud"


@pytest.mark.parametrize(
    ("pool", "category", "commitment"),
    [
        ("aws:eu-central-1/m6i.xlarge/spot", "Dynamic", None),
        ("azure:westeurope/D4s/ondemand", "Standard", None),
        ("private:fra-dc1/r740/reserved", "Committed", "private:fra-dc1/r740/reserved"),
    ],
)
def test_pricing_category_by_capacity_type(pool: str, category: str, commitment: str | None) -> None:
    _e, rows = _rows()
    row = next(r for r in rows if r["SkuPriceId"] == pool)
    assert row["PricingCategory"] == category
    assert row["CommitmentDiscountId"] == commitment
    assert row["ServiceCategory"] == "Compute"


def test_spot_list_cost_prices_the_on_demand_node() -> None:
    e, rows = _rows()
    spot = next(r for r in rows if r["PricingCategory"] == "Dynamic")
    hours = e.active_hours(spot["ChargePeriodStart"], spot["ChargePeriodEnd"])  # type: ignore[arg-type]
    assert hours == pytest.approx(6.0)  # created at 18:00 on the first charge day
    assert float(spot["ListCost"]) == pytest.approx(0.5 * 2 * hours)  # type: ignore[arg-type]
    assert float(spot["BilledCost"]) == pytest.approx(0.4 * hours)  # type: ignore[arg-type]
    assert float(spot["PricingQuantity"]) == pytest.approx(2 * hours)  # type: ignore[arg-type]


def test_charge_periods_are_utc_days_clipped_to_the_window() -> None:
    got = list(charge_periods(T0, T0 + timedelta(hours=30)))
    assert got == [
        (T0, datetime(2026, 12, 1, tzinfo=UTC)),
        (datetime(2026, 12, 1, tzinfo=UTC), T0 + timedelta(hours=30)),
    ]


def test_parquet_and_csv_carry_the_focus_columns_and_types() -> None:
    _e, rows = _rows()
    table = pq.read_table(io.BytesIO(to_parquet(rows)))
    assert table.column_names == list(COLUMN_NAMES)
    assert table.num_rows == len(rows)
    for field in table.schema:
        assert ARROW[dict(FOCUS_COLUMNS)[field.name]](field.type), field.name
    assert table.schema.metadata[b"focus_version"] == b"1.2"
    assert table.schema == focus_schema()
    reader = csv.DictReader(io.StringIO(to_csv(rows).decode()))
    assert reader.fieldnames == list(COLUMN_NAMES)
    first = next(reader)
    datetime.strptime(first["ChargePeriodStart"], "%Y-%m-%dT%H:%M:%SZ")
    Decimal(first["BilledCost"])


def test_no_rows_for_an_empty_window() -> None:
    _e, rows = _rows()
    assert rows
    e = entry_from_placement(replace(PLACEMENT, id="p", tenant="t", name="n"))
    assert focus_rows([e], [], start=T0, end=T0 + timedelta(days=1)) == []
    assert to_csv([]).decode().strip().split(",")[0] == '"AvailabilityZone"'


def test_contracted_prices_exclude_the_commitment_discount() -> None:
    """FOCUS 1.2: ContractedUnitPrice includes negotiated discounts but not commitment discounts,
    and ContractedCost = ContractedUnitPrice x PricingQuantity; EffectiveCost keeps the discount."""
    ri_pool = "aws:eu-central-1/m6i.xlarge/reserved"
    p = replace(
        PLACEMENT,
        result=replace(
            PLACEMENT.result,
            nodes=(*PLACEMENT.result.nodes, NodeAllocation(ri_pool, 1, 0.12)),
            assignments=(*PLACEMENT.result.assignments, assignment("a", ri_pool, 1, 0.12, breakdown={"compute": 0.12})),
            cost_per_hour=1.12,
        ),
    )
    e = entry_from_placement(p)
    items = items_from_placement(e, p, lambda pool: 0.2 if "m6i" in pool else None)  # on demand: 0.2
    rows = focus_rows([e], items, start=T0 - timedelta(days=1), end=T0 + timedelta(hours=30))
    ri = [r for r in rows if r["SkuPriceId"] == ri_pool]
    assert ri
    for r in ri:
        assert r["PricingCategory"] == "Committed"
        assert float(r["ContractedUnitPrice"]) == pytest.approx(0.2)  # type: ignore[arg-type]
        assert float(r["ListUnitPrice"]) == pytest.approx(0.2)  # type: ignore[arg-type]
        assert float(r["EffectiveCost"]) == pytest.approx(0.12 * float(r["PricingQuantity"]))  # type: ignore[arg-type]
        assert float(r["ContractedCost"]) > float(r["EffectiveCost"])  # type: ignore[arg-type]
    for r in rows:  # everywhere: the contracted cost is the contracted price times the quantity
        if r["ContractedUnitPrice"] is not None and r["PricingQuantity"] is not None:
            expected = float(r["ContractedUnitPrice"]) * float(r["PricingQuantity"])  # type: ignore[arg-type]
            assert float(r["ContractedCost"]) == pytest.approx(expected, rel=1e-6), r["SkuPriceId"]  # type: ignore[arg-type]


def test_list_price_is_public_and_contracted_price_is_negotiated() -> None:
    """A negotiated discount: the on-demand node lists at 0.25 publicly and costs 0.2 under the
    contract. ListUnitPrice is the public 0.25 on every compute row; ContractedUnitPrice is what
    the contract charges on demand (0.2), also on a committed row, whose effective price is 0.12."""
    ri_pool = "aws:eu-central-1/m6i.xlarge/reserved"
    od_pool = "aws:eu-central-1/m6i.xlarge/ondemand"
    p = replace(
        PLACEMENT,
        result=replace(
            PLACEMENT.result,
            nodes=(*PLACEMENT.result.nodes, NodeAllocation(ri_pool, 1, 0.12), NodeAllocation(od_pool, 1, 0.2)),
            assignments=(
                *PLACEMENT.result.assignments,
                assignment("a", ri_pool, 1, 0.12, breakdown={"compute": 0.12}),
                assignment("a", od_pool, 1, 0.2, breakdown={"compute": 0.2}),
            ),
            cost_per_hour=1.32,
        ),
    )
    e = entry_from_placement(p)
    items = items_from_placement(
        e, p, lambda pool: 0.25 if "m6i" in pool else None, lambda pool: 0.2 if "m6i" in pool else None
    )
    rows = focus_rows([e], items, start=T0 - timedelta(days=1), end=T0 + timedelta(hours=30))
    by_pool = {str(r["SkuPriceId"]): r for r in rows}
    od, ri = by_pool[od_pool], by_pool[ri_pool]
    assert float(od["ListUnitPrice"]) == pytest.approx(0.25)  # type: ignore[arg-type]
    assert float(od["ContractedUnitPrice"]) == pytest.approx(0.2)  # type: ignore[arg-type]
    assert float(ri["ListUnitPrice"]) == pytest.approx(0.25)  # type: ignore[arg-type]
    assert float(ri["ContractedUnitPrice"]) == pytest.approx(0.2)  # type: ignore[arg-type]
    q = float(ri["PricingQuantity"])  # type: ignore[arg-type]
    assert float(ri["ContractedCost"]) == pytest.approx(0.2 * q)  # type: ignore[arg-type]
    assert float(ri["ListCost"]) == pytest.approx(0.25 * q)  # type: ignore[arg-type]


def test_a_huge_placements_tags_stay_within_a_csv_field() -> None:
    names = [f"workload-{i:06d}" for i in range(20_000)]
    p = placement(
        [assignment(n, "aws:eu-central-1/m6i.xlarge/spot", 1, 0.001) for n in names],
        nodes=[("aws:eu-central-1/m6i.xlarge/spot", 5000, 5.0)],
        request={"workloads": [{"name": n} for n in names]},
        cost_per_hour=20.0,
        id="pl_3",
        created_at=T0,
    )
    e = entry_from_placement(p)
    rows = focus_rows([e], items_from_placement(e, p, lambda q: None), start=T0, end=T0 + timedelta(hours=1))
    tags = json.loads(str(rows[0]["Tags"]))
    assert tags["broker/workloads"].endswith(",... (19900 more)") and len(str(rows[0]["Tags"])) < 131_072
