"""GCP: Compute Engine per-core and per-GiB prices from the Cloud Billing Catalog, machine types
from the Compute API; a machine type's price is vCPUs x core price + GiB x RAM price.

Fields used:
- ``CloudCatalogClient.list_skus(parent="services/6F81-5844-456A")`` (Compute Engine):
  ``description`` ("N2 Instance Core running in Belgium", "Spot Preemptible N2 Instance Ram
  running in ..."), ``category.resourceFamily`` (Compute | Storage), ``category.usageType``
  (OnDemand | Preemptible), ``serviceRegions``, ``pricingInfo[0].pricingExpression.usageUnit``
  (h, GiBy.h, GiBy.mo) and ``tieredRates[-1].unitPrice`` (``units`` + ``nanos`` / 1e9),
  ``pricingInfo[0].effectiveTime``. Storage: "Storage PD Capacity" (pd-standard),
  "Balanced PD Capacity" (pd-balanced), "SSD backed PD Capacity" (pd-ssd).
- ``MachineTypesClient.aggregated_list``: ``name``, ``guestCpus``, ``memoryMb``,
  ``accelerators[].guestAcceleratorType/Count``, ``architecture``; shared-core types
  (``isSharedCpu``) are skipped, their SKUs are not per core.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pricing.offers import FeedResult, InstanceSpec, Offer, StoragePrice
from providers.base import FeedOptions, FeedUnavailable, MalformedResponse, Progress, noop_progress

NAME = "gcp"
COMPUTE_SERVICE = "services/6F81-5844-456A"
_SKU_RE = re.compile(
    r"^(?P<spot>Spot Preemptible |Preemptible )?(?P<family>[A-Z][A-Z0-9]*) (?:AMD |Arm |Intel )?"
    r"(?:Predefined )?Instance (?P<kind>Core|Ram) running in "
)
STORAGE = {"Storage PD Capacity": "standard", "Balanced PD Capacity": "ssd", "SSD backed PD Capacity": "premium"}
PRODUCTS = {"standard": "pd-standard", "ssd": "pd-balanced", "premium": "pd-ssd"}


# ---- parse (pure) -------------------------------------------------------------------


def _unit_price(sku: Mapping[str, Any]) -> tuple[float, str, str]:
    try:
        info = sku["pricingInfo"][0]
        expr = info["pricingExpression"]
        money = expr["tieredRates"][-1]["unitPrice"]
        price = float(money.get("units") or 0) + float(money.get("nanos") or 0) / 1e9
        return price, str(expr["usageUnit"]), str(info.get("effectiveTime", ""))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"SKU {sku.get('skuId')!r} without a usable pricingInfo: {exc}") from exc


def parse_skus(
    skus: Iterable[Mapping[str, Any]], regions: Sequence[str]
) -> dict[tuple[str, str, str, str], tuple[float, str]]:
    """(region, family, ondemand|spot, core|ram) -> (USD per vCPU-hour or GiB-hour, effective time)."""
    wanted = set(regions)
    out: dict[tuple[str, str, str, str], tuple[float, str]] = {}
    for sku in skus:
        m = _SKU_RE.match(str(sku.get("description", "")))
        if m is None or sku.get("category", {}).get("resourceFamily") != "Compute":
            continue
        price, unit, eff = _unit_price(sku)
        if unit not in ("h", "GiBy.h"):
            continue
        capacity = "spot" if m["spot"] or sku["category"].get("usageType") == "Preemptible" else "ondemand"
        for region in sku.get("serviceRegions", []):
            if region in wanted:
                out[(region, m["family"].lower(), capacity, m["kind"].lower())] = (price, eff)
    return out


def parse_storage_skus(skus: Iterable[Mapping[str, Any]], regions: Sequence[str]) -> list[StoragePrice]:
    out: dict[tuple[str, str], StoragePrice] = {}
    for sku in skus:
        desc = str(sku.get("description", ""))
        tier = next((t for prefix, t in STORAGE.items() if desc.startswith(prefix)), None)
        if tier is None or sku.get("category", {}).get("resourceFamily") != "Storage":
            continue
        price, unit, eff = _unit_price(sku)
        if unit != "GiBy.mo":
            continue
        for region in sku.get("serviceRegions", []):
            if region in regions:
                # USD per GiB-month -> per GB-month, the unit of the storage_prices table
                out[(region, tier)] = StoragePrice(NAME, region, tier, price / 1.073741824, PRODUCTS[tier], eff)
    return list(out.values())


def parse_machine_types(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], InstanceSpec]:
    """(region, machine type) -> spec; zones collapse to their region."""
    out: dict[tuple[str, str], InstanceSpec] = {}
    for mt in items:
        if mt.get("isSharedCpu"):
            continue
        try:
            zone = str(mt["zone"]).rsplit("/", 1)[-1]
            accel = mt.get("accelerators") or []
            spec = InstanceSpec(
                instance_type=mt["name"],
                vcpus=float(mt["guestCpus"]),
                memory_gib=float(mt["memoryMb"]) / 1024.0,
                arch="arm64" if str(mt.get("architecture", "")).upper() == "ARM64" else "amd64",
                gpus=float(sum(a.get("guestAcceleratorCount", 0) for a in accel)),
                gpu_model=accel[0].get("guestAcceleratorType") if accel else None,
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise MalformedResponse(f"machine type {mt.get('name')!r}: {exc}") from exc
        out[(zone.rsplit("-", 1)[0], spec.instance_type)] = spec
    return out


def price_machine_types(
    rates: Mapping[tuple[str, str, str, str], tuple[float, str]], specs: Mapping[tuple[str, str], InstanceSpec]
) -> list[Offer]:
    """Price each machine type from its family's core and RAM rates; types without both are skipped.
    GPU machine types are priced host-only here, as the catalog does (accelerators are separate SKUs)."""
    offers: list[Offer] = []
    for (region, itype), spec in sorted(specs.items()):
        family = itype.split("-", 1)[0]
        for capacity in ("ondemand", "spot"):
            core = rates.get((region, family, capacity, "core"))
            ram = rates.get((region, family, capacity, "ram"))
            if core is None or ram is None:
                continue
            price = spec.vcpus * core[0] + spec.memory_gib * ram[0]
            offers.append(Offer(NAME, region, itype, capacity, round(price, 6), max(core[1], ram[1])))
    return offers


# ---- fetch (I/O) ---------------------------------------------------------------------


class GcpPriceSource:
    name = NAME

    def __init__(
        self, options: FeedOptions | None = None, *, project: str | None = None, credentials: Any = None
    ) -> None:
        self.options = options or FeedOptions()
        self.project = project
        self.credentials = credentials
        # (region, machine type) -> spec to price when no project is set (the catalog's own types)
        self.fallback_specs: dict[tuple[str, str], InstanceSpec] = {}

    def _client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"transport": "rest"}
        if self.options.endpoint:
            kwargs["client_options"] = {"api_endpoint": self.options.endpoint}
        if self.credentials is not None:
            kwargs["credentials"] = self.credentials
        return kwargs

    def fetch(self, regions: Sequence[str], progress: Progress | None = None) -> FeedResult:
        from google.api_core import exceptions as gexc
        from google.api_core.retry import Retry, if_transient_error
        from google.auth import exceptions as auth_exc
        from google.cloud import billing_v1, compute_v1

        progress = progress or noop_progress
        retry = Retry(
            predicate=if_transient_error,
            initial=self.options.backoff_s,
            maximum=self.options.backoff_s * 16,
            timeout=self.options.timeout_s * self.options.attempts,
        )
        result = FeedResult(NAME, regions=list(regions))
        try:
            progress("gcp billing catalog", 0, 2)
            catalog = billing_v1.CloudCatalogClient(**self._client_kwargs())
            skus = [
                billing_v1.Sku.to_dict(s, preserving_proto_field_name=False)
                for s in catalog.list_skus(parent=COMPUTE_SERVICE, retry=retry, timeout=self.options.timeout_s)
            ]
            rates = parse_skus(skus, regions)
            result.storage = parse_storage_skus(skus, regions)
            progress("gcp machine types", 1, 2)
            specs: dict[tuple[str, str], InstanceSpec] = dict(self.fallback_specs)
            if self.project:  # machine types need a project; without one, catalog specs are used
                machines = compute_v1.MachineTypesClient(**self._client_kwargs())
                items = []
                for _zone, scoped in machines.aggregated_list(
                    request={"project": self.project}, retry=retry, timeout=self.options.timeout_s
                ):
                    items += [
                        compute_v1.MachineType.to_dict(m, preserving_proto_field_name=False)
                        for m in scoped.machine_types
                    ]
                specs = parse_machine_types(items)
            result.specs = {itype: s for (_r, itype), s in specs.items()}
            result.offers = price_machine_types(rates, {k: v for k, v in specs.items() if k[0] in regions})
        except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, MalformedResponse) as exc:
            raise FeedUnavailable(NAME, None, f"{type(exc).__name__}: {exc}") from exc
        progress("gcp", 2, 2)
        return result
