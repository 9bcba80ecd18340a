"""AWS: EC2 Linux prices from the Price List Query API, spot prices and instance specs from EC2.

fetch (I/O, boto3) and parse (pure) are separate; the parsers are tested on recorded
responses in the documented formats (tests/fixtures/providers/aws/).

Fields used:
- ``pricing.get_products`` (ServiceCode AmazonEC2, FormatVersion aws_v1): ``product.attributes``
  ``instanceType``, ``regionCode``, ``vcpu``, ``memory``, ``gpu``, ``volumeApiName``;
  ``terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD`` (unit ``Hrs``);
  ``terms.Reserved.*`` with ``termAttributes`` ``LeaseContractLength`` (1yr | 3yr),
  ``OfferingClass`` standard, ``PurchaseOption`` All Upfront (``Upfront Fee`` quantity + hourly);
  ``effectiveDate``.
- ``ec2.describe_spot_price_history`` (Linux/UNIX, latest price per zone): ``InstanceType``,
  ``AvailabilityZone``, ``SpotPrice``, ``Timestamp``. A region's spot pool takes the lowest
  current zone price (a node can be started in the cheapest zone).
- ``ec2.describe_instance_types``: ``VCpuInfo.DefaultVCpus``, ``MemoryInfo.SizeInMiB``,
  ``ProcessorInfo.SupportedArchitectures``, ``GpuInfo.Gpus[].Name/Count/MemoryInfo.SizeInMiB``,
  ``BareMetal``; the price list's ``physicalProcessor`` (the processor name EC2 does not give).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pricing.offers import FeedResult, InstanceSpec, Offer, StoragePrice
from providers.base import FeedOptions, FeedUnavailable, MalformedResponse, Progress, noop_progress

NAME = "aws"
HOURS_PER_YEAR = 8760.0
PRICING_REGION = "us-east-1"  # the Price List Query API is served from us-east-1 (and ap-south-1)
COMPUTE_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
}
STORAGE_TIERS = {"st1": "standard", "gp3": "ssd", "io2": "premium"}  # EBS volume type -> broker tier


# ---- parse (pure) -------------------------------------------------------------------


def _usd(dim: Mapping[str, Any]) -> float:
    try:
        return float(dim["pricePerUnit"]["USD"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"price dimension without pricePerUnit.USD: {dim!r:.200}") from exc


def _reserved_hourly(term: Mapping[str, Any]) -> float:
    """Effective hourly rate of a reserved term: upfront fee spread over the term plus the hourly part."""
    years = {"1yr": 1.0, "3yr": 3.0}[term["termAttributes"]["LeaseContractLength"]]
    upfront = hourly = 0.0
    for dim in term["priceDimensions"].values():
        if dim.get("unit") == "Quantity":
            upfront += _usd(dim)
        elif dim.get("unit") == "Hrs":
            hourly += _usd(dim)
    return hourly + upfront / (years * HOURS_PER_YEAR)


def parse_price_list(price_list: Iterable[str | Mapping[str, Any]], region: str) -> list[Offer]:
    """On-demand and reserved (1-year, with the 3-year rate alongside) offers of one region."""
    offers: list[Offer] = []
    for raw in price_list:
        item = json.loads(raw) if isinstance(raw, str) else raw
        try:
            attrs = item["product"]["attributes"]
            terms = item.get("terms", {})
            itype = attrs["instanceType"]
        except (KeyError, TypeError) as exc:
            raise MalformedResponse(f"price list item without product.attributes.instanceType: {exc}") from exc
        if attrs.get("regionCode", region) != region:
            continue
        for term in terms.get("OnDemand", {}).values():
            prices = [_usd(d) for d in term["priceDimensions"].values() if d.get("unit") == "Hrs"]
            if prices and prices[0] > 0:
                offers.append(Offer(NAME, region, itype, "ondemand", prices[0], term.get("effectiveDate", "")))
        by_years: dict[str, tuple[float, str]] = {}
        for term in terms.get("Reserved", {}).values():
            ta = term.get("termAttributes", {})
            if ta.get("OfferingClass") == "standard" and ta.get("PurchaseOption") == "All Upfront":
                by_years[ta["LeaseContractLength"]] = (_reserved_hourly(term), term.get("effectiveDate", ""))
        if "1yr" in by_years:
            r3 = by_years.get("3yr", (None, ""))[0]
            rate, eff = by_years["1yr"]
            offers.append(Offer(NAME, region, itype, "reserved", rate, eff, reserved_3yr_per_hour=r3))
    return offers


def parse_price_list_specs(price_list: Iterable[str | Mapping[str, Any]]) -> dict[str, InstanceSpec]:
    """Specs from price-list attributes, for types describe_instance_types does not return."""
    out: dict[str, InstanceSpec] = {}
    for raw in price_list:
        attrs = (json.loads(raw) if isinstance(raw, str) else raw)["product"]["attributes"]
        try:
            mem = float(str(attrs["memory"]).split()[0].replace(",", ""))
            arch = "arm64" if "graviton" in str(attrs.get("physicalProcessor", "")).lower() else "amd64"
            gpus = float(attrs.get("gpu", 0) or 0)
            processor = str(attrs.get("physicalProcessor", "")).strip()
            out[attrs["instanceType"]] = InstanceSpec(
                attrs["instanceType"],
                float(attrs["vcpu"]),
                mem,
                arch,
                gpus,
                processor=processor if processor not in ("", "Variable") else None,
            )
        except (KeyError, ValueError):
            continue  # an item without usable specs still has a price; specs may come from EC2
    return out


def parse_spot_history(items: Iterable[Mapping[str, Any]], region: str) -> list[Offer]:
    """Lowest current price per instance type over the region's zones (latest record per zone)."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for it in items:
        try:
            key = (str(it["InstanceType"]), str(it["AvailabilityZone"]))
            ts = it["Timestamp"]
            ts = ts if isinstance(ts, datetime) else datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
            price = float(it["SpotPrice"])
        except (KeyError, ValueError, TypeError) as exc:
            raise MalformedResponse(f"spot price record {it!r:.200}: {exc}") from exc
        if key not in latest or ts > latest[key][0]:
            latest[key] = (ts, price)
    best: dict[str, tuple[float, datetime]] = {}
    for (itype, _zone), (ts, price) in latest.items():
        if itype not in best or price < best[itype][0]:
            best[itype] = (price, ts)
    return [
        Offer(NAME, region, itype, "spot", price, ts.astimezone(UTC).isoformat())
        for itype, (price, ts) in sorted(best.items())
    ]


def parse_instance_types(items: Iterable[Mapping[str, Any]]) -> dict[str, InstanceSpec]:
    out: dict[str, InstanceSpec] = {}
    for it in items:
        try:
            archs = it["ProcessorInfo"]["SupportedArchitectures"]
            gpus = it.get("GpuInfo", {}).get("Gpus", [])
            gpu_mib = gpus[0].get("MemoryInfo", {}).get("SizeInMiB") if gpus else None
            bare = it.get("BareMetal")
            out[it["InstanceType"]] = InstanceSpec(
                instance_type=it["InstanceType"],
                vcpus=float(it["VCpuInfo"]["DefaultVCpus"]),
                memory_gib=float(it["MemoryInfo"]["SizeInMiB"]) / 1024.0,
                arch="arm64" if "arm64" in archs and "x86_64" not in archs else "amd64",
                gpus=float(sum(g.get("Count", 0) for g in gpus)),
                gpu_model=gpus[0].get("Name") if gpus else None,
                gpu_memory_gib=float(gpu_mib) / 1024.0 if gpu_mib else None,
                bare_metal=None if bare is None else str(bare).lower() == "true",
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedResponse(f"instance type record {it!r:.200}: {exc}") from exc
    return out


def parse_storage(price_list: Iterable[str | Mapping[str, Any]], region: str) -> list[StoragePrice]:
    out: list[StoragePrice] = []
    for raw in price_list:
        item = json.loads(raw) if isinstance(raw, str) else raw
        attrs = item["product"]["attributes"]
        tier = STORAGE_TIERS.get(str(attrs.get("volumeApiName", "")))
        if tier is None or attrs.get("regionCode", region) != region:
            continue
        for term in item.get("terms", {}).get("OnDemand", {}).values():
            for dim in term["priceDimensions"].values():
                if dim.get("unit") == "GB-Mo":
                    out.append(
                        StoragePrice(
                            NAME,
                            region,
                            tier,
                            _usd(dim),
                            f"EBS {attrs['volumeApiName']}",
                            term.get("effectiveDate", ""),
                        )
                    )
    return out


# ---- fetch (I/O) ---------------------------------------------------------------------


def _filters(**fields: str) -> list[dict[str, str]]:
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


class AwsPriceSource:
    name = NAME

    def __init__(self, options: FeedOptions | None = None, session: Any = None) -> None:
        self.options = options or FeedOptions()
        self._session = session

    def _clients(self, region: str) -> tuple[Any, Any]:
        import boto3
        from botocore.config import Config

        session = self._session or boto3.session.Session()
        cfg = Config(
            connect_timeout=self.options.timeout_s,
            read_timeout=self.options.timeout_s,
            # botocore's own retry loop (exponential backoff, throttling-aware) is the SDK-native one
            retries={"total_max_attempts": self.options.attempts, "mode": "standard"},
        )
        pricing = session.client("pricing", region_name=PRICING_REGION, endpoint_url=self.options.endpoint, config=cfg)
        ec2 = session.client("ec2", region_name=region, endpoint_url=self.options.endpoint, config=cfg)
        return pricing, ec2

    def fetch(self, regions: Sequence[str], progress: Progress | None = None) -> FeedResult:
        from botocore.exceptions import BotoCoreError, ClientError

        progress = progress or noop_progress
        result = FeedResult(NAME, regions=list(regions))
        for i, region in enumerate(regions):
            progress(f"aws {region}", i, len(regions))
            try:
                self._fetch_region(region, result)
            except (BotoCoreError, ClientError, MalformedResponse, KeyError) as exc:
                raise FeedUnavailable(NAME, region, f"{type(exc).__name__}: {exc}") from exc
        progress("aws", len(regions), len(regions))
        return result

    def _fetch_region(self, region: str, result: FeedResult) -> None:
        pricing, ec2 = self._clients(region)
        compute = [
            item
            for page in pricing.get_paginator("get_products").paginate(
                ServiceCode="AmazonEC2",
                FormatVersion="aws_v1",
                Filters=_filters(regionCode=region, productFamily="Compute Instance", **COMPUTE_FILTERS),
            )
            for item in page["PriceList"]
        ]
        result.offers += parse_price_list(compute, region)
        for itype, spec in parse_price_list_specs(compute).items():
            result.specs.setdefault(itype, spec)
        storage = [
            item
            for page in pricing.get_paginator("get_products").paginate(
                ServiceCode="AmazonEC2",
                FormatVersion="aws_v1",
                Filters=_filters(regionCode=region, productFamily="Storage"),
            )
            for item in page["PriceList"]
        ]
        result.storage += parse_storage(storage, region)
        spot = [
            rec
            for page in ec2.get_paginator("describe_spot_price_history").paginate(
                ProductDescriptions=["Linux/UNIX"], StartTime=datetime.now(UTC)
            )
            for rec in page["SpotPriceHistory"]
        ]
        result.offers += parse_spot_history(spot, region)
        types = [t for page in ec2.get_paginator("describe_instance_types").paginate() for t in page["InstanceTypes"]]
        for itype, spec in parse_instance_types(types).items():  # EC2's own specs win over price-list text
            listed = result.specs.get(itype)
            processor = spec.processor or (listed.processor if listed else None)  # EC2 names no processor
            result.specs[itype] = replace(spec, processor=processor)
