"""`pools.csv.gz`: one row per site, instance type and capacity type, priced from the three provider catalogs."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

from pricing.node_classes import active_vcpus
from pricing.snapshot_build.common import Report, dec_str, num, positive_price, read_csv_str

AWS_AS_OF = "2026-07-05"
AZURE_AS_OF = "2026-05-20"
GCP_AS_OF = "2026-05-20"

GCP_ARM_FAMILIES = frozenset({"t2a", "c4a", "n4a"})
AZURE_ARM_RE = re.compile(r"^Standard_[A-Z]+\d+[a-z]*p[a-z]*_v\d")

# Accelerator-optimised families we deliberately do not price (their host row
# excludes the accelerator and the pairing is not SkyPilot's documented one).
GCP_UNMAPPED_ACCEL_FAMILIES = ("a3-edgegpu-", "a3-ultragpu-", "a4-highgpu-", "a4x-")

# GCP machine types whose catalog row is host-only: pattern -> accelerator name, and how
# many come with the type (None: the count is the pattern's number, e.g. a2-highgpu-4g).
_GCP_HOST_ONLY_ACCELERATORS: tuple[tuple[re.Pattern[str], str, int | None], ...] = (
    (re.compile(r"a2-highgpu-(\d+)g"), "A100", None),
    (re.compile(r"a2-megagpu-16g"), "A100", 16),
    (re.compile(r"a2-ultragpu-(\d+)g"), "A100-80GB", None),
    (re.compile(r"a3-highgpu-(\d+)g"), "H100", None),
    (re.compile(r"a3-megagpu-8g"), "H100-MEGA", 8),
)
# g2 sizes (vCPUs) -> L4 GPUs; other g2 sizes have no documented pairing.
_G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}


def gcp_accelerator_for(instance_type: str) -> tuple[str, int] | None:
    """Accelerator (name, count) that must be added to a host-only GCP machine type."""
    for pattern, name, count in _GCP_HOST_ONLY_ACCELERATORS:
        m = pattern.fullmatch(instance_type)
        if m:
            return (name, count if count is not None else int(m.group(1)))
    m = re.fullmatch(r"g2-standard-(\d+)", instance_type)
    if m and int(m.group(1)) in _G2_GPUS:
        return ("L4", _G2_GPUS[int(m.group(1))])
    return None


def aws_arch(physical_processor: str) -> str:
    return "arm64" if "graviton" in physical_processor.lower() else "amd64"


def azure_arch(size: str) -> str:
    return "arm64" if AZURE_ARM_RE.match(size) else "amd64"


def gcp_arch(instance_type: str) -> str:
    return "arm64" if instance_type.split("-", 1)[0] in GCP_ARM_FAMILIES else "amd64"


def _pool(
    site: str,
    it: str,
    cap: str,
    arch: str,
    vcpus: str,
    mem: str,
    gpus: str,
    model: str,
    price: str,
    source: str,
    as_of: str,
    r3: str = "",
) -> dict[str, str]:
    return {
        "site": site,
        "instance_type": it,
        "capacity_type": cap,
        "arch": arch,
        "vcpus": num(vcpus),
        "memory_gib": num(mem),
        "gpus": num(gpus),
        "gpu_model": model,
        "price_per_hour": price,
        "price_source": source,
        "price_as_of": as_of,
        "reserved_3yr_per_hour": r3,
    }


def build_aws_pools(data: Path, site_ids: set[str], rep: Report) -> list[dict[str, str]]:
    df = read_csv_str(data / "pricing" / "aws_ec2_linux_prices.csv")
    out: list[dict[str, str]] = []
    skipped_site = 0
    for r in df.to_dict("records"):
        site = f"aws:{r['region']}"
        if site not in site_ids:
            skipped_site += 1
            continue
        arch = aws_arch(str(r["physical_processor"]))
        args = (site, str(r["instance_type"]))
        spec = (arch, str(r["vcpus"]), str(r["memory_gib"]), str(r["gpu_count"]), str(r["gpu_model"]))
        if positive_price(str(r["price_ondemand_usd_hr"])):
            out.append(_pool(*args, "ondemand", *spec, str(r["price_ondemand_usd_hr"]), "aws", AWS_AS_OF))
        if positive_price(str(r["price_spot_avg_usd_hr"])):
            out.append(_pool(*args, "spot", *spec, str(r["price_spot_avg_usd_hr"]), "aws", AWS_AS_OF))
        r1 = str(r["price_reserved_1yr_allupfront_usd_hr"])
        r3 = str(r["price_reserved_3yr_allupfront_usd_hr"])
        if positive_price(r1):
            out.append(_pool(*args, "reserved", *spec, r1, "aws", AWS_AS_OF, r3 if positive_price(r3) else ""))
    rep.note(f"pools: aws rows skipped because their location is not a site: {skipped_site}")
    return out


def build_azure_pools(data: Path, site_ids: set[str], rep: Report) -> list[dict[str, str]]:
    df = read_csv_str(data / "pricing" / "azure_vms.csv")
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    dup = 0
    constrained = 0
    for r in df.to_dict("records"):
        site = f"azure:{r['Region']}"
        if site not in site_ids:
            continue
        key = (site, str(r["InstanceType"]))
        if key in seen:
            dup += 1
            continue
        seen.add(key)
        listed = str(r["vCPUs"])
        # a constrained-vCPU size runs the active count its name says, at its parent's memory and price
        active = active_vcpus("azure", key[1], float(listed))
        if active != float(listed):
            constrained += 1
        spec = (
            azure_arch(str(r["InstanceType"])),
            dec_str(Decimal(str(active))) if active != float(listed) else listed,
            str(r["MemoryGiB"]),
            str(r["AcceleratorCount"]),
            str(r["AcceleratorName"]),
        )
        if positive_price(str(r["Price"])):
            out.append(_pool(*key, "ondemand", *spec, str(r["Price"]), "azure", AZURE_AS_OF))
        if positive_price(str(r["SpotPrice"])):
            out.append(_pool(*key, "spot", *spec, str(r["SpotPrice"]), "azure", AZURE_AS_OF))
    rep.note(f"pools: azure constrained-vCPU (site, size) rows given the active vCPUs of their name: {constrained}")
    if dup:
        rep.note(f"pools: azure duplicate (region, size) rows ignored (first kept): {dup}")
    return out


def build_gcp_pools(data: Path, site_ids: set[str], rep: Report) -> list[dict[str, str]]:
    df = read_csv_str(data / "pricing" / "gcp_vms.csv")
    accel: dict[tuple[str, str, int], tuple[str, str]] = {}
    for r in df[df["InstanceType"] == ""].to_dict("records"):
        name = str(r["AcceleratorName"])
        if name.startswith("tpu") or not r["AcceleratorCount"]:
            continue
        accel[(str(r["AvailabilityZone"]), name, int(float(str(r["AcceleratorCount"]))))] = (
            str(r["Price"]),
            str(r["SpotPrice"]),
        )
    hosts = df[df["InstanceType"] != ""]
    # (region, type) -> spec + per-zone (ondemand, spot) strings
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in hosts.to_dict("records"):
        groups[(str(r["Region"]), str(r["InstanceType"]))].append({k: str(v) for k, v in r.items()})

    out: list[dict[str, str]] = []
    dropped_unmapped: Counter[str] = Counter()
    dropped_no_accel: list[str] = []
    od_conflicts = 0
    for (region, it), rows in sorted(groups.items()):
        site = f"gcp:{region}"
        if site not in site_ids:
            continue
        if it.startswith(GCP_UNMAPPED_ACCEL_FAMILIES):
            dropped_unmapped[it] += 1
            continue
        acc = gcp_accelerator_for(it)
        od_vals: list[str] = []
        spot_vals: list[tuple[Decimal, str]] = []
        for row in rows:
            od, sp = row["Price"], row["SpotPrice"]
            if acc is not None:
                a = accel.get((row["AvailabilityZone"], acc[0], acc[1]))
                if a is None or not positive_price(od) or not positive_price(a[0]):
                    continue
                od = dec_str(Decimal(od) + Decimal(a[0]))
                both = positive_price(sp) and positive_price(a[1])
                sp = dec_str(Decimal(sp) + Decimal(a[1])) if both else ""
            if positive_price(od):
                od_vals.append(od)
            if positive_price(sp):
                spot_vals.append((Decimal(sp), sp))
        if acc is not None and not od_vals:
            dropped_no_accel.append(f"{region}/{it}")
            continue
        first = rows[0]
        gpus = str(acc[1]) if acc else (first["AcceleratorCount"] or "0")
        model = acc[0] if acc else first["AcceleratorName"]
        spec = (gcp_arch(it), first["vCPUs"], first["MemoryGiB"], gpus, model)
        if od_vals:
            uniq = sorted(set(od_vals), key=Decimal)
            if len(uniq) > 1:
                od_conflicts += 1
            # Identical across zones in practice; if not, take the highest (conservative).
            out.append(_pool(site, it, "ondemand", *spec, uniq[-1], "gcp", GCP_AS_OF))
        if spot_vals:
            out.append(_pool(site, it, "spot", *spec, min(spot_vals)[1], "gcp", GCP_AS_OF))
    rep.note(f"pools: gcp on-demand prices differing across zones of a region: {od_conflicts}")
    rep.note(
        "pools: gcp accelerator-optimised types dropped (no documented host+accelerator pairing): "
        + ", ".join(f"{k} ({v} regions)" for k, v in sorted(dropped_unmapped.items()))
    )
    more = " ..." if len(dropped_no_accel) > 12 else ""
    rep.note(
        "pools: gcp host-only GPU types dropped where the accelerator price is missing: "
        f"{len(dropped_no_accel)} ({', '.join(dropped_no_accel[:12])}{more})"
    )
    rep.counts["gcp_dropped_no_accel"] = len(dropped_no_accel)
    rep.counts["gcp_dropped_unmapped"] = sum(dropped_unmapped.values())
    return out


# --------------------------------------------------------------------------- latency
