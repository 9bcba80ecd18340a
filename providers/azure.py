"""Azure: VM and managed-disk prices from the Retail Prices REST API, VM specs from resource SKUs.

Fields used:
- Retail Prices API (``GET {endpoint}/api/retail/prices?$filter=...``, no auth, paged by
  ``NextPageLink``): ``Items[]`` ``armRegionName``, ``armSkuName``, ``skuName``, ``productName``,
  ``meterName``, ``type`` (Consumption | Reservation), ``reservationTerm`` (1 Year | 3 Years),
  ``retailPrice``, ``unitOfMeasure``, ``effectiveStartDate``, ``currencyCode``. Linux only
  (products named ``... Windows`` are skipped), ``Low Priority`` meters skipped, ``Spot`` meters
  become spot pools. A reservation's ``retailPrice`` is the whole term's price, so its hourly
  rate is price / (8760 x years).
- Managed disks (``serviceName eq 'Storage'``): the 128 GiB LRS sizes S10 / E10 / P10 of
  Standard HDD / Standard SSD / Premium SSD, per month, divided by their size in GB.
- ``azure-mgmt-compute`` ``resource_skus.list`` (``resourceType == virtualMachines``):
  ``capabilities`` vCPUs (vCPUsAvailable where a constrained-vCPU size states it), MemoryGB, GPUs,
  CpuArchitectureType; ``restrictions`` of type Location.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pricing.node_classes import active_vcpus
from pricing.offers import FeedResult, InstanceSpec, Offer, StoragePrice
from providers.base import (
    FeedOptions,
    FeedUnavailable,
    MalformedResponse,
    Progress,
    noop_progress,
    with_retries,
)

NAME = "azure"
RETAIL_ENDPOINT = "https://prices.azure.com"
API_VERSION = "2023-01-01-preview"
HOURS_PER_YEAR = 8760.0
TERM_YEARS = {"1 Year": 1.0, "3 Years": 3.0}
GB_PER_GIB = 1.073741824
DISKS = {  # broker tier -> (product, meter): 128 GiB LRS disks, priced per disk-month
    "standard": ("Standard HDD Managed Disks", "S10 LRS Disk"),
    "ssd": ("Standard SSD Managed Disks", "E10 LRS Disk"),
    "premium": ("Premium SSD Managed Disks", "P10 LRS Disk"),
}
DISK_GIB = 128.0


# ---- parse (pure) -------------------------------------------------------------------


def vm_filter(region: str) -> str:
    return f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and currencyCode eq 'USD'"


def disk_filter(region: str) -> str:
    return f"serviceName eq 'Storage' and armRegionName eq '{region}' and contains(productName, 'Managed Disks')"


def parse_retail_prices(items: Iterable[Mapping[str, Any]], region: str) -> list[Offer]:
    ondemand: dict[str, Offer] = {}
    spot: dict[str, Offer] = {}
    reserved: dict[tuple[str, float], tuple[float, str]] = {}
    for it in items:
        try:
            if it["armRegionName"] != region or it.get("currencyCode", "USD") != "USD":
                continue
            sku, product, name = str(it["armSkuName"]), str(it["productName"]), str(it["skuName"])
            price, eff, kind = float(it["retailPrice"]), str(it.get("effectiveStartDate", "")), it["type"]
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedResponse(f"retail price item {it!r:.200}: {exc}") from exc
        if not sku or product.endswith("Windows") or "Low Priority" in name or price <= 0:
            continue
        if kind == "Consumption" and it.get("unitOfMeasure") == "1 Hour":
            target = spot if name.endswith("Spot") else ondemand
            if sku not in target or price < target[sku].price_per_hour:
                target[sku] = Offer(NAME, region, sku, "spot" if target is spot else "ondemand", price, eff)
        elif kind == "Reservation" and it.get("reservationTerm") in TERM_YEARS:
            years = TERM_YEARS[str(it["reservationTerm"])]
            reserved[(sku, years)] = (price / (HOURS_PER_YEAR * years), eff)
    offers = [*ondemand.values(), *spot.values()]
    for (sku, years), (rate, eff) in sorted(reserved.items()):
        if years == 1.0:
            r3 = reserved.get((sku, 3.0), (None, ""))[0]
            offers.append(Offer(NAME, region, sku, "reserved", rate, eff, reserved_3yr_per_hour=r3))
    return offers


def parse_disk_prices(items: Iterable[Mapping[str, Any]], region: str) -> list[StoragePrice]:
    out: list[StoragePrice] = []
    for tier, (product, meter) in DISKS.items():
        for it in items:
            if (
                it.get("armRegionName") == region
                and it.get("productName") == product
                and it.get("meterName") == meter
                and it.get("type") == "Consumption"
            ):
                per_gb = float(it["retailPrice"]) / (DISK_GIB * GB_PER_GIB)
                out.append(
                    StoragePrice(
                        NAME, region, tier, per_gb, f"{product} {meter}", str(it.get("effectiveStartDate", ""))
                    )
                )
                break
    return out


def _active_vcpus(name: str, caps: Mapping[str, Any]) -> float:
    """What a VM of the size runs: a constrained-vCPU size (Standard_E16-4as_v5) lists its parent's
    `vCPUs` (16) and its own in `vCPUsAvailable` (4); the name says the same where that is absent."""
    listed = float(caps["vCPUs"])
    if "vCPUsAvailable" in caps:
        return min(listed, float(caps["vCPUsAvailable"]))
    return active_vcpus(NAME, name, listed)


def parse_resource_skus(skus: Iterable[Mapping[str, Any]]) -> dict[str, InstanceSpec]:
    out: dict[str, InstanceSpec] = {}
    for sku in skus:
        if sku.get("resourceType") != "virtualMachines":
            continue
        caps = {c["name"]: c["value"] for c in sku.get("capabilities") or []}
        try:
            restricted = frozenset(
                loc
                for r in sku.get("restrictions") or []
                if r.get("type") == "Location"
                for loc in (r.get("values") or [])
            )
            out[sku["name"]] = InstanceSpec(
                instance_type=sku["name"],
                vcpus=_active_vcpus(sku["name"], caps),
                memory_gib=float(caps["MemoryGB"]),
                arch="arm64" if caps.get("CpuArchitectureType") == "Arm64" else "amd64",
                gpus=float(caps.get("GPUs", 0)),
                restricted_regions=restricted,
            )
        except (KeyError, ValueError) as exc:
            raise MalformedResponse(f"resource SKU {sku.get('name')!r}: missing or bad {exc}") from exc
    return out


# ---- fetch (I/O) ---------------------------------------------------------------------


def _retryable(exc: BaseException) -> bool:
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


def _is_loopback_http(url: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")


class AzurePriceSource:
    name = NAME

    def __init__(
        self,
        options: FeedOptions | None = None,
        *,
        subscription_id: str | None = None,
        credential: Any = None,
        management_endpoint: str | None = None,
    ) -> None:
        self.options = options or FeedOptions()
        self.subscription_id = subscription_id
        self.credential = credential
        self.management_endpoint = management_endpoint

    def _pages(self, client: Any, flt: str) -> list[dict[str, Any]]:
        base = (self.options.endpoint or RETAIL_ENDPOINT).rstrip("/")
        url: str | None = f"{base}/api/retail/prices"
        params: dict[str, str] | None = {"api-version": API_VERSION, "$filter": flt}
        items: list[dict[str, Any]] = []
        while url:
            page_url, page_params = url, params

            def get(page_url: str = page_url, page_params: dict[str, str] | None = page_params) -> Any:
                r = client.get(page_url, params=page_params)
                r.raise_for_status()
                return r.json()

            body = with_retries(get, options=self.options, retryable=_retryable)
            if not isinstance(body, dict) or not isinstance(body.get("Items"), list):
                raise MalformedResponse("retail prices page without an Items list")
            items += body["Items"]
            url, params = body.get("NextPageLink"), None  # the next link carries the query
        return items

    def fetch(self, regions: Sequence[str], progress: Progress | None = None) -> FeedResult:
        import httpx

        progress = progress or noop_progress
        result = FeedResult(NAME, regions=list(regions))
        with httpx.Client(timeout=self.options.timeout_s) as client:
            for i, region in enumerate(regions):
                progress(f"azure {region}", i, len(regions))
                try:
                    result.offers += parse_retail_prices(self._pages(client, vm_filter(region)), region)
                    result.storage += parse_disk_prices(self._pages(client, disk_filter(region)), region)
                except (httpx.HTTPError, MalformedResponse, ValueError) as exc:
                    raise FeedUnavailable(NAME, region, f"{type(exc).__name__}: {exc}") from exc
        if self.subscription_id:  # specs need a subscription; without one, catalog specs are kept
            result.specs = self._resource_skus(regions)
        progress("azure", len(regions), len(regions))
        return result

    def _resource_skus(self, regions: Sequence[str]) -> dict[str, InstanceSpec]:
        from azure.core.exceptions import AzureError
        from azure.mgmt.compute import ComputeManagementClient

        try:
            credential = self.credential
            if credential is None:
                from azure.identity import DefaultAzureCredential

                credential = DefaultAzureCredential()
            kwargs: dict[str, Any] = {
                "connection_timeout": self.options.timeout_s,
                "read_timeout": self.options.timeout_s,
            }
            if self.management_endpoint:
                kwargs["base_url"] = self.management_endpoint
            client = ComputeManagementClient(credential, str(self.subscription_id), **kwargs)
            # the API filters on one location only; for several regions it lists all and parse keeps them
            flt = f"location eq '{regions[0]}'" if len(regions) == 1 else None
            # azure-core refuses bearer tokens over plain http (per request option); a loopback test
            # server or local TLS-terminating proxy is the one place where that is safe
            options: dict[str, Any] = (
                {"enforce_https": False} if _is_loopback_http(self.management_endpoint or "") else {}
            )
            skus = [s.as_dict() for s in client.resource_skus.list(filter=flt, **options)]  # REST field names
            return parse_resource_skus(skus)
        except (AzureError, MalformedResponse) as exc:
            raise FeedUnavailable(NAME, None, f"resource SKUs: {type(exc).__name__}: {exc}") from exc
