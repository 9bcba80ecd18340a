"""Build the bundled catalog snapshot (``pricing/snapshot/``) from the shared reference data.

Usage::

    python -m pricing.build_snapshot --data /work/shared/data --out pricing/snapshot

Pure standard library + pandas. Deterministic: every output is sorted and the gzip
header carries no timestamp, so re-running on the same input gives identical bytes.
Prices are copied as the catalog's decimal strings; the only arithmetic on prices is
the GCP host + accelerator sum, done in ``decimal.Decimal`` (exact).

This module must not import ``broker`` (layering: pricing is the bottom layer).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pandas as pd

from pricing.build_instance_types import INSTANCE_TYPE_COLUMNS, build_instance_types

AWS_AS_OF = "2026-07-05"
AZURE_AS_OF = "2026-05-20"
GCP_AS_OF = "2026-05-20"

SITE_COLUMNS = [
    "id",
    "provider",
    "kind",
    "region",
    "name",
    "country",
    "jurisdictions",
    "lat",
    "lon",
    "carbon_g_per_kwh",
    "carbon_source",
]
POOL_COLUMNS = [
    "site",
    "instance_type",
    "capacity_type",
    "arch",
    "vcpus",
    "memory_gib",
    "gpus",
    "gpu_model",
    "price_per_hour",
    "price_source",
    "price_as_of",
    "reserved_3yr_per_hour",
]
LATENCY_COLUMNS = ["src", "dst", "rtt_ms", "statistic", "source", "rtt_p95_ms", "samples"]

GCP_ARM_FAMILIES = frozenset({"t2a", "c4a", "n4a"})
AZURE_ARM_RE = re.compile(r"^Standard_[A-Z]+\d+[a-z]*p[a-z]*_v\d")

# GCP machine types whose catalog row is host-only: (accelerator name, count).
_G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
# Accelerator-optimised families we deliberately do not price (their host row
# excludes the accelerator and the pairing is not SkyPilot's documented one).
GCP_UNMAPPED_ACCEL_FAMILIES = ("a3-edgegpu-", "a3-ultragpu-", "a4-highgpu-", "a4x-")

# AWS zone code: <parent>-<metro>-<n> (Local Zone) or <parent>-wl<k>-<metro><n> (Wavelength).
AWS_PARENT_RE = re.compile(r"^(?:[a-z]{2}|us-gov)-[a-z]+-\d$")
AWS_LOCAL_ZONE_RE = re.compile(r"^(?P<parent>[a-z]{2}-[a-z]+-\d)-(?P<metro>[a-z]{3})-\d+$")
AWS_WAVELENGTH_RE = re.compile(r"^(?P<parent>[a-z]{2}-[a-z]+-\d)-wl\d+-(?P<metro>[a-z]{3})\d+$")

CCF_COMMIT = "dda7621f8ab227dcb45096af6ccc2227aaf92b3e"


def gcp_accelerator_for(instance_type: str) -> tuple[str, int] | None:
    """Accelerator (name, count) that must be added to a host-only GCP machine type."""
    m = re.fullmatch(r"a2-highgpu-(\d+)g", instance_type)
    if m:
        return ("A100", int(m.group(1)))
    if instance_type == "a2-megagpu-16g":
        return ("A100", 16)
    m = re.fullmatch(r"a2-ultragpu-(\d+)g", instance_type)
    if m:
        return ("A100-80GB", int(m.group(1)))
    m = re.fullmatch(r"a3-highgpu-(\d+)g", instance_type)
    if m:
        return ("H100", int(m.group(1)))
    if instance_type == "a3-megagpu-8g":
        return ("H100-MEGA", 8)
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


def _dec(s: str) -> Decimal | None:
    s = s.strip()
    if not s:
        return None
    try:
        return Decimal(s)
    except InvalidOperation:
        return None


def positive_price(s: str) -> bool:
    d = _dec(s)
    return d is not None and d > 0


def num(s: str) -> str:
    """Normalise a numeric spec string without changing its value ("16.0" -> "16")."""
    d = _dec(s)
    if d is None:
        return "0"
    out = format(d.normalize(), "f")
    return "0" if out in ("-0", "") else out


def dec_str(d: Decimal) -> str:
    return format(d.normalize(), "f")


def national_code(iso2: str) -> str:
    return "UK" if iso2 == "GB" else iso2


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def note(self, msg: str) -> None:
        self.lines.append(msg)
        print(msg)


# --------------------------------------------------------------------------- readers


def read_csv_str(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def load_eea(data: Path) -> dict[str, tuple[bool, bool]]:
    df = read_csv_str(data / "regions" / "eea_countries_2021-01-01.csv")
    out: dict[str, tuple[bool, bool]] = {}
    for r in df.itertuples(index=False):
        out[str(r.iso2c)] = (str(r.eu27).upper() == "TRUE", str(r.eea).upper() == "TRUE")
    return out


def jurisdictions(iso2: str, in_eu: bool, in_eea: bool) -> str:
    parts = []
    if in_eu:
        parts.append("EU")
    if in_eea:
        parts.append("EEA")
    parts.append(national_code(iso2))
    return ";".join(parts)


def ccf_factors(path: Path, rep: Report) -> dict[str, tuple[Decimal, str]]:
    """Region (or display name) -> (gCO2e/kWh, note). Repairs the two malformed Azure rows."""
    out: dict[str, tuple[Decimal, str]] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    col = header.index("CO2e (metric ton/kWh)")
    for row in rows[1:]:
        if not row or not row[0].strip():
            continue
        raw = row[col].strip() if len(row) > col else ""
        note = ""
        if re.fullmatch(r"0\d+", raw):
            # Source lost the leading "0." (e.g. "000077" for 0.000077 t/kWh).
            fixed = "0." + raw
            note = f"repaired malformed CCF value '{raw}' -> {fixed}"
            rep.note(f"carbon: {path.name}: {row[0]}: {note}")
            raw = fixed
        d = _dec(raw)
        if d is None:
            rep.note(f"carbon: {path.name}: {row[0]}: unparseable value {raw!r}, skipped")
            continue
        out[row[0].strip()] = (d * Decimal(1_000_000), note)
    return out


def gcp_carbon(data: Path) -> dict[str, tuple[Decimal, int]]:
    out: dict[str, tuple[Decimal, int]] = {}
    for year in range(2025, 2018, -1):
        p = data / "carbon" / f"gcp_region_carbon_{year}.csv"
        if not p.exists():
            continue
        df = read_csv_str(p)
        for r in df.itertuples(index=False):
            region = str(r[0]).strip()
            d = _dec(str(r[3]))
            if region and d is not None and region not in out:
                out[region] = (d, year)
    return out


# --------------------------------------------------------------------------- sites


def build_sites(data: Path, rep: Report) -> list[dict[str, str]]:
    regions = read_csv_str(data / "regions" / "regions.csv")
    eea = load_eea(data)
    reg: dict[tuple[str, str], dict[str, str]] = {
        (str(r["provider"]), str(r["region"])): {k: str(v) for k, v in r.items()} for r in regions.to_dict("records")
    }
    aws = read_csv_str(data / "pricing" / "aws_ec2_linux_prices.csv")
    azure = read_csv_str(data / "pricing" / "azure_vms.csv")
    gcp = read_csv_str(data / "pricing" / "gcp_vms.csv")

    aws_locs = sorted(set(aws["region"]))
    aws_parents = [r for r in aws_locs if AWS_PARENT_RE.match(r)]
    aws_zones = [r for r in aws_locs if not AWS_PARENT_RE.match(r)]
    public: list[tuple[str, str]] = [("aws", r) for r in aws_parents]
    public += [("azure", r) for r in sorted(set(azure["Region"]))]
    public += [("gcp", r) for r in sorted(set(gcp["Region"]))]

    carbon_aws = ccf_factors(data / "carbon" / "ccf_grid_emissions_factors_aws.csv", rep)
    carbon_az_by_name = ccf_factors(data / "carbon" / "ccf_grid_emissions_factors_azure.csv", rep)
    az_name_to_code = {v["display_name"]: k[1] for k, v in reg.items() if k[0] == "azure" and v["display_name"]}
    carbon_az: dict[str, tuple[Decimal, str]] = {}
    for name, val in carbon_az_by_name.items():
        code = az_name_to_code.get(name)
        if code is None and ("azure", name.lower().replace(" ", "")) in reg:
            code = name.lower().replace(" ", "")  # e.g. "Finland Central" -> finlandcentral
        if code is None:
            rep.note(f"carbon: azure CCF display name {name!r} not in regions.csv, unused")
            continue
        carbon_az[code] = val
    carbon_gcp = gcp_carbon(data)

    sites: list[dict[str, str]] = []
    for provider, region in public:
        meta = reg.get((provider, region))
        if meta is None or not meta["country_iso2"] or not meta["lat"] or not meta["lon"]:
            rep.note(f"sites: skipped {provider}:{region} (no country/coordinates in regions.csv)")
            continue
        iso2 = meta["country_iso2"]
        carbon, source = "", ""
        if provider == "gcp" and region in carbon_gcp:
            gval, year = carbon_gcp[region]
            carbon, source = dec_str(gval), f"gcp_region_carbon_{year}.csv (Google, {year})"
        elif provider == "aws" and region in carbon_aws:
            carbon = dec_str(carbon_aws[region][0])
            source = "ccf_grid_emissions_factors_aws.csv (CCF, 2023-05)"
        elif provider == "azure" and region in carbon_az:
            aval, note = carbon_az[region]
            carbon = dec_str(aval)
            source = "ccf_grid_emissions_factors_azure.csv (CCF, 2023-05)" + ("; repaired row" if note else "")
        sites.append(
            {
                "id": f"{provider}:{region}",
                "provider": provider,
                "kind": "public",
                "region": region,
                "name": meta["display_name"],
                "country": iso2,
                "jurisdictions": jurisdictions(iso2, meta["in_eu"].lower() == "true", meta["in_eea"].lower() == "true"),
                "lat": meta["lat"],
                "lon": meta["lon"],
                "carbon_g_per_kwh": carbon,
                "carbon_source": source,
            }
        )

    metros = read_csv_str(Path(__file__).with_name("aws_zone_metros.csv"))
    metro = {str(r["metro"]): {k: str(v) for k, v in r.items()} for r in metros.to_dict("records")}
    for zone in aws_zones:
        m = AWS_WAVELENGTH_RE.match(zone)
        kind_name = "Wavelength Zone"
        if m is None:
            m = AWS_LOCAL_ZONE_RE.match(zone)
            kind_name = "Local Zone"
        if m is None:
            rep.note(f"sites: skipped aws:{zone} (zone code names no metro)")
            continue
        info = metro.get(m.group("metro"))
        if info is None:
            rep.note(f"sites: skipped aws:{zone} (metro '{m.group('metro')}' not placed with confidence)")
            continue
        iso2 = info["country_iso2"]
        in_eu, in_eea = eea.get(iso2, (False, False))
        sites.append(
            {
                "id": f"aws:{zone}",
                "provider": "aws",
                "kind": "edge",
                "region": zone,
                "name": f"AWS {kind_name} ({info['city']}), parent {m.group('parent')}",
                "country": iso2,
                "jurisdictions": jurisdictions(iso2, in_eu, in_eea),
                "lat": info["lat"],
                "lon": info["lon"],
                "carbon_g_per_kwh": "",
                "carbon_source": "",
            }
        )
    sites.sort(key=lambda s: s["id"])
    return sites


# --------------------------------------------------------------------------- pools


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
    for r in df.to_dict("records"):
        site = f"azure:{r['Region']}"
        if site not in site_ids:
            continue
        key = (site, str(r["InstanceType"]))
        if key in seen:
            dup += 1
            continue
        seen.add(key)
        spec = (
            azure_arch(str(r["InstanceType"])),
            str(r["vCPUs"]),
            str(r["MemoryGiB"]),
            str(r["AcceleratorCount"]),
            str(r["AcceleratorName"]),
        )
        if positive_price(str(r["Price"])):
            out.append(_pool(*key, "ondemand", *spec, str(r["Price"]), "azure", AZURE_AS_OF))
        if positive_price(str(r["SpotPrice"])):
            out.append(_pool(*key, "spot", *spec, str(r["SpotPrice"]), "azure", AZURE_AS_OF))
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


def gcp_zone_to_region(region: str) -> str:
    m = re.fullmatch(r"(.+-\w+\d+)-[a-z]", region)
    return m.group(1) if m else region


#: Sources whose figures are typical values (a ping run's average, a one-year median);
#: the pair's median is taken over them.
TYPICAL_SOURCES = ("skyplane_2022", "cloudping_2022-04")
#: Microsoft's published Azure figures are 95th percentiles over 30 days (the newest data).
P95_SOURCE = "azure_docs_2026-07"


def _ms(v: float) -> str:
    return f"{round(v, 3):.3f}".rstrip("0").rstrip(".")


def _pair_stats(typical: list[float], premium: list[float], p95s: list[float]) -> tuple[float, str, float]:
    """(p50, statistic of the p50, p95) of one unordered pair from its figures."""
    if typical:
        p50, stat = statistics.median(typical), "p50"
        if p95s and max(p95s) < p50:  # a newer route: the pair's p95 bounds its median
            p50, stat = max(p95s), "p95_30d"
    else:
        p50, stat = statistics.median(p95s), "p95_30d"
    p95 = max(p95s) if p95s else float(pd.Series(premium or typical).quantile(0.95, interpolation="linear"))
    return p50, stat, max(p95, p50)


def build_latency(data: Path, site_ids: set[str], rep: Report) -> list[dict[str, str]]:
    df = pd.read_csv(data / "latency" / "inter_region_rtt.csv", keep_default_na=False, dtype=str)
    df["rtt"] = pd.to_numeric(df["rtt_ms"], errors="coerce")
    df = df[df["source"].isin((*TYPICAL_SOURCES, P95_SOURCE)) & df["rtt"].notna()]
    src = df["src_provider"] + ":" + df["src_region"].map(gcp_zone_to_region)
    dst = df["dst_provider"] + ":" + df["dst_region"].map(gcp_zone_to_region)
    # skyplane runs with a GCP end on the STANDARD network tier: figures for the median only
    standard = (df["src_network_tier"] == "STANDARD") | (df["dst_network_tier"] == "STANDARD")

    # unordered pair -> figures: typical (every run, both directions), premium (the typical
    # ones on the default PREMIUM tier), p95 (Azure's published P95s, both directions)
    typical: dict[tuple[str, str], list[float]] = defaultdict(list)
    premium: dict[tuple[str, str], list[float]] = defaultdict(list)
    p95s: dict[tuple[str, str], list[float]] = defaultdict(list)
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    unknown: set[str] = set()
    for a, b, source, rtt, std in zip(src, dst, df["source"], df["rtt"], standard, strict=True):
        if a == b:
            continue
        if a not in site_ids or b not in site_ids:
            unknown.update(x for x in (a, b) if x not in site_ids)
            continue
        key = (a, b) if a < b else (b, a)
        if source == P95_SOURCE:
            p95s[key].append(float(rtt))
        else:
            typical[key].append(float(rtt))
            if not std:
                premium[key].append(float(rtt))
        sources[key].add(str(source))
    if unknown:
        rep.note(f"latency: endpoints not in sites.csv, pairs dropped: {', '.join(sorted(unknown))}")
    out: list[dict[str, str]] = []
    stats: Counter[str] = Counter()
    for key in sources:
        figures = (typical.get(key, []), premium.get(key, []), p95s.get(key, []))
        p50, stat, p95 = _pair_stats(*figures)
        stats[stat] += 1
        row = {
            "rtt_ms": _ms(p50),
            "statistic": stat,
            "source": "+".join(sorted(sources[key])),
            "rtt_p95_ms": _ms(p95),
            "samples": str(len(figures[0]) + len(figures[2])),
        }
        a, b = key
        out.append({"src": a, "dst": b, **row})
        out.append({"src": b, "dst": a, **row})
    out.sort(key=lambda r: (r["src"], r["dst"]))
    rep.note(
        f"latency: {len(out)} ordered pairs ({len(sources)} unordered); "
        f"statistic of rtt_ms: {dict(sorted(stats.items()))}"
    )
    return out


# --------------------------------------------------------------------------- network


def build_egress(data: Path, site_ids: set[str], rep: Report) -> list[dict[str, str]]:
    df = read_csv_str(data / "network" / "skyplane_egress_cost_matrix_2022.csv")
    df = df[(df["src_tier"] == "PREMIUM") & (df["dest_tier"] == "PREMIUM")]
    best: dict[tuple[str, str], str] = {}
    skipped = 0
    for r in df.to_dict("records"):
        src = "{}:{}".format(*_split_site(str(r["src"])))
        dst = "{}:{}".format(*_split_site(str(r["dest"])))
        if src == dst:
            continue
        if src not in site_ids or dst not in site_ids:
            skipped += 1
            continue
        prev = best.get((src, dst))
        if prev is None or Decimal(str(r["cost"])) > Decimal(prev):
            best[(src, dst)] = str(r["cost"])
    rep.note(f"egress: {len(best)} pairs; {skipped} rows dropped (endpoint not a site)")
    return [{"src": s, "dst": d, "usd_per_gb": c} for (s, d), c in sorted(best.items())]


def _split_site(s: str) -> tuple[str, str]:
    provider, region = s.split(":", 1)
    if provider == "gcp":
        region = gcp_zone_to_region(region)
    return provider, region


def build_internet_egress(data: Path, site_ids: set[str], rep: Report) -> list[dict[str, str]]:
    df = read_csv_str(data / "network" / "coroot_internet_egress_tiers.csv")
    first_paid: dict[str, str] = {}
    for (provider, region), g in df.groupby(["provider", "region"], sort=True):
        rows = sorted(
            (
                (int(float(k)), v)
                for k, v in zip(g["tier_key_gb"], g["usd_per_gb"], strict=True)
                if positive_price(str(v))
            ),
            key=lambda t: t[0],
        )
        if rows:
            first_paid[f"{provider}:{region}"] = str(rows[0][1])
    out = [{"site": s, "usd_per_gb": v} for s, v in sorted(first_paid.items()) if s in site_ids]
    not_sites = sorted(s for s in first_paid if s not in site_ids)
    rep.note(f"internet_egress: region rows not matching a site, not written: {', '.join(not_sites)}")
    for provider in ("aws", "azure", "gcp"):
        vals = [Decimal(r["usd_per_gb"]) for r in out if r["site"].startswith(provider + ":")]
        med = statistics.median(vals)
        out.append({"site": f"{provider}:*", "usd_per_gb": dec_str(Decimal(med))})
    missing = sorted(s for s in site_ids if s not in first_paid)
    rep.note(f"internet_egress: {len(missing)} sites fall back to the provider median")
    return out


STORAGE_SOURCE = (
    "public list price, reference region (us-east-1/eastus/us-central1), 2026; "
    "replaced by live feeds in `broker pricing refresh`"
)


def build_storage() -> list[dict[str, str]]:
    table = [
        ("aws", "standard", "0.045", "EBS st1"),
        ("aws", "ssd", "0.08", "EBS gp3"),
        ("aws", "premium", "0.125", "EBS io2"),
        ("azure", "standard", "0.045", "Standard HDD"),
        ("azure", "ssd", "0.075", "Standard SSD"),
        ("azure", "premium", "0.15", "Premium SSD"),
        ("gcp", "standard", "0.04", "pd-standard"),
        ("gcp", "ssd", "0.10", "pd-balanced"),
        ("gcp", "premium", "0.17", "pd-ssd"),
    ]
    out = [
        {"provider": p, "tier": t, "usd_per_gb_month": v, "product": prod, "source": STORAGE_SOURCE}
        for p, t, v, prod in table
    ]
    for p in ("edge", "private"):
        for t in ("standard", "ssd", "premium"):
            out.append(
                {
                    "provider": p,
                    "tier": t,
                    "usd_per_gb_month": "0",
                    "product": "owned",
                    "source": "owned hardware; cost is in the node TCO price",
                }
            )
    return out


# --------------------------------------------------------------------------- SOURCES.md

SOURCES_TEMPLATE = """# Catalog snapshot: sources and derivation

Generated by `python -m pricing.build_snapshot --data <shared data> --out pricing/snapshot`
(`pricing/build_snapshot.py`). Do not edit by hand; re-run the builder. All inputs are
files of the shared reference data folder (its `README.md` gives full provenance); the
upstream repository and commit of each are repeated below. Output is sorted and
deterministic; `pools.csv.gz` is written with a zero gzip timestamp.

## `sites.csv`

Columns `id,provider,kind,region,name,country,jurisdictions,lat,lon,carbon_g_per_kwh,carbon_source`.

- **Public regions** (`kind=public`): every region that has prices: AWS parent regions of
  `pricing/aws_ec2_linux_prices.csv` (`jawaadjariwala/AWS-EC2-Pricing-Landscape-Analysis`
  @ `b7dbceba0649cdc693d50de8a96e696b281e847a`, 2026-07-05), Azure regions of
  `pricing/azure_vms.csv` and GCP regions of `pricing/gcp_vms.csv` (`anycloud-sh/catalog`
  @ `62ff0a987e0c257a89235415d2877812fb1aaf29`, 2026-05-20). `id = <provider>:<region>`.
- **Name, country (ISO 3166-1 alpha-2), lat/lon, EU/EEA**: `regions/regions.csv` (compiled
  from `agonza05/cloudregioncodes` @ `fc98afb9d3f139b9e9cc69965f06fb1302cf9bbd` (Azure,
  `az account list-locations`) and @ `102c9e34dbe7e6550faacc1e12e23763f324695b`
  (TeleGeography, AWS/GCP); metro-level coordinates). Regions without country or
  coordinates are skipped (listed below).
- **jurisdictions**: `;`-joined: `EU` if `in_eu`, `EEA` if `in_eea`, then the national
  code: ISO2 of the country, except `UK` for `GB`. EU/EEA membership of edge zones comes
  from `regions/eea_countries_2021-01-01.csv` (`dveenman/outliers` @
  `316b9c3f59222ad367d974860dd0f48222199374`).
- **AWS Local Zones / Wavelength Zones** (`kind=edge`, `provider=aws`, `region` = zone
  code, e.g. `aws:us-east-1-bos-1`): the metro code in the zone code
  (`<parent>-<metro>-<n>` or `<parent>-wl<k>-<metro><n>`) is looked up in
  `pricing/aws_zone_metros.csv`, a hand-written table. **Its coordinates are city-centre
  coordinates of the metro named by the zone code**, not data-centre sites. Two codes
  needed checking: `cmn` = Casablanca, Morocco (AWS's Wavelength guide lists the
  `eu-west-3` Wavelength Zones under "Morocco (Casablanca)"); `cjj` = Daejeon, South
  Korea (AWS prices the zone as "Asia Pacific (SKT) - Daejeon"; CJJ is the nearby Cheongju
  airport code). Zones that could not be placed with confidence are skipped (below) and
  their prices are not in `pools.csv.gz`. Edge zones have no carbon figure.
- **carbon_g_per_kwh** (gCO2e/kWh): GCP from Google's `carbon/gcp_region_carbon_<year>.csv`
  (`GoogleCloudPlatform/region-carbon-info`, 2025 from commit
  `74d9bf818f1c6ea5111e26f2d1d4d4c788169129`, older years @
  `49f3f26bfd682305e8d9b572fea1f811900421a9`), column "Grid carbon intensity", newest
  year that has the region (2025, else 2024, ...). AWS and Azure from Cloud Carbon
  Footprint's `carbon/ccf_grid_emissions_factors_{{aws,azure}}.csv`
  (`cloud-carbon-footprint/cloud-carbon-coefficients` @ `{ccf}`, 2023-05-08), metric
  t/kWh x 1e6 (exact decimal arithmetic). The Azure file uses display names; they are
  mapped to codes through `regions.csv` `display_name`, else through the lower-cased
  space-less name (`Finland Central` -> `finlandcentral`). The two malformed Azure rows
  (`Finland Central,...,000077,...` and `Germany West Central,...,000402,...`: leading
  `0.` lost in the source, extra comma) are read as 0.000077 and 0.000402 t/kWh, i.e. 77
  and 402 g/kWh (the only reading consistent with the neighbouring EEA figures); the
  site's `carbon_source` then says `repaired row`. Empty where no source has the region.
  `carbon_source` names file and year.

## `pools.csv.gz`

Columns `site,instance_type,capacity_type,arch,vcpus,memory_gib,gpus,gpu_model,`
`price_per_hour,price_source,price_as_of,reserved_3yr_per_hour`.
One row per site x instance type x capacity type. Prices are the catalog's decimal strings,
copied unchanged; rows with an empty or zero price are skipped. Spec numbers are
normalised without changing their value (`16.0` -> `16`).

- **AWS** (`aws_ec2_linux_prices.csv`, `price_as_of` 2026-07-05, the source commit date):
  `ondemand` = `price_ondemand_usd_hr`; `spot` = `price_spot_avg_usd_hr` (an average spot
  price, not a guarantee); `reserved` = `price_reserved_1yr_allupfront_usd_hr` (1-year
  all-upfront effective hourly), with the 3-year all-upfront effective hourly price in
  `reserved_3yr_per_hour` (empty on all other rows). `gpus` = `gpu_count` (fractional for
  fractional-GPU types), `gpu_model` = `gpu_model` (joined upstream from
  `tsaol/aws-gpu` @ `77fcd9fe1d0652fd07b830e5ed030d61da87923e`). Rows of skipped edge zones
  are dropped.
- **Azure** (`azure_vms.csv`, 2026-05-20): `ondemand` = `Price`, `spot` = `SpotPrice`;
  `gpus` = `AcceleratorCount`, `gpu_model` = `AcceleratorName`.
- **GCP** (`gcp_vms.csv`, 2026-05-20): zones collapsed to regions. On-demand is the same in
  every zone (checked by the builder; if not, the highest would be taken); spot = the
  **minimum** over the region's zones (as `vm_prices_normalized.csv` does). Host-only
  accelerator machine types get the accelerator row of the **same zone** added
  (SkyPilot's convention, shared README section 1.4): `a2-highgpu-Ng` -> A100 xN,
  `a2-megagpu-16g` -> A100 x16, `a2-ultragpu-Ng` -> A100-80GB xN, `a3-highgpu-Ng` -> H100
  xN, `a3-megagpu-8g` -> H100-MEGA x8, `g2-standard-N` -> L4 x1 (N = 4/8/12/16/32), x2
  (24), x4 (48), x8 (96). The sum is exact (`Decimal`); spot = host spot + accelerator spot
  of the same zone, then the minimum over zones. A zone without the accelerator price is
  ignored; a region where no zone has it drops the type. Accelerator-optimised families
  outside that list (`a3-edgegpu`, `a3-ultragpu`, `a4-highgpu`) are dropped: their host row
  excludes the GPUs and pricing them host-only would understate cost. TPU rows and other
  rows with an empty `InstanceType` are not emitted.
- **arch**: AWS `physical_processor` contains "Graviton" -> `arm64`; Azure size name
  matches `^Standard_[A-Z]+\\d+[a-z]*p[a-z]*_v\\d` (feature letter `p`, e.g.
  `Standard_D2ps_v5`, `Standard_B2pls_v2`) -> `arm64`; GCP family `t2a`, `c4a` or `n4a` ->
  `arm64`; everything else `amd64`.

## `latency.csv`

Columns `src,dst,rtt_ms,statistic,source,rtt_p95_ms,samples`; site ids; no self-pairs;
symmetric (both directions carry the same row). One statistic per column, the same for
every pair: `rtt_ms` is the pair's **median** (typical) RTT, `rtt_p95_ms` a conservative
one. From `latency/inter_region_rtt.csv`:

- `skyplane_2022`, statistic `ping_avg` (the average of one VM-to-VM ping run), AWS/Azure/GCP
  including cross-cloud pairs; every run of a pair, both directions and (GCP) every
  network-tier combination, is one figure. Upstream `skyplane-project/skyplane`
  `profiles/latency.csv` @ `2e3b2c01735054a8053d6a939d69fe43a652d2d0` (2022-11).
- `cloudping_2022-04`, statistic `p50_1y`, AWS<->AWS, both directions. cloudping.co via
  `bc-computing/gus-automation` @ `8308392dfd6b7f071959940982cbdd5afd186281` (2022-04-08).
- `azure_docs_2026-07`, statistic `p95_30d`, Azure<->Azure, both directions. Microsoft
  azure-docs via `mbender-ms/azure-docs` @ `5b3e2055eddead4c24aac48156dad9f006268126` (P95
  over the 30 days to 2026-07-30).

Per unordered pair:

- `rtt_ms` = the median of the typical figures (skyplane runs and cloudping medians), so one
  noisy run does not decide a pair (gcp `us-central1`<->`us-east4`: runs of 22-38 ms and
  two Standard-tier runs of 80-89 ms give 25.7 ms). `statistic` = `p50`. Where the pair's
  only figures are Azure's P95s, `rtt_ms` is their median and `statistic` = `p95_30d` (an
  upper bound of the median: for the 190 AWS pairs both skyplane and cloudping measured, the
  one-year median is within 1.4 % of the ping average at the median pair, so backbone RTT
  varies little). Where Azure's newer P95 is below the older median (a new route), the P95
  bounds it and `statistic` = `p95_30d`.
- `rtt_p95_ms` = the highest of Azure's P95s where the pair has them; otherwise the 95th
  percentile (linear interpolation) of the typical figures on GCP's default PREMIUM network
  tier (Standard-tier runs have long tails, up to 50x the Premium figure, that a placement on
  the default tier does not see). Never below `rtt_ms`.
- `source` = the sources with figures for the pair, `+`-joined; `samples` = the number of
  figures. RTT rounded to 0.001 ms.

## `egress.csv`

Columns `src,dst,usd_per_gb`: inter-region transfer price from
`network/skyplane_egress_cost_matrix_2022.csv` (`skyplane-project/skyplane`
`profiles/cost.csv` @ `2e3b2c01735054a8053d6a939d69fe43a652d2d0`, 2022-11),
PREMIUM/PREMIUM rows, GCP zones mapped to regions, self-pairs dropped.

## `internet_egress.csv`

Columns `site,usd_per_gb`: first paid tier (lowest `tier_key_gb` with a price > 0) of
`network/coroot_internet_egress_tiers.csv` (`coroot/cloud-pricing` gh-pages @
`af03eada15b25d80863f2547ba281e71af9d5c91`, 2024-08-09) for every site that has rows.
Rows `aws:*`, `azure:*`, `gcp:*` are the provider default for sites without their own row:
the median over that provider's site rows (coroot's `azure:Global` and AT&T edge-zone rows
are not sites and are not in the median).

## `storage.csv`

Columns `provider,tier,usd_per_gb_month,product,source`. Public list prices per GB-month
of block storage in a reference region (us-east-1 / eastus / us-central1), 2026: AWS
st1 0.045 / gp3 0.08 / io2 0.125; Azure Standard HDD 0.045 / Standard SSD 0.075 / Premium
SSD 0.15; GCP pd-standard 0.04 / pd-balanced 0.10 / pd-ssd 0.17 (tiers standard / ssd /
premium). `private` and `edge` (owned) are 0: the cost is in the node TCO price. These
are replaced by live feeds in `broker pricing refresh`.

## `instance_types.csv`

Columns `provider,instance_type,processor,gpu_memory_gib,bare_metal`: what a source states
about an instance type of `pools.csv.gz` beyond its size (`pricing/build_instance_types.py`);
empty = not stated. AWS (every type): `processor` = `physical_processor` (`Variable` left
empty), `bare_metal` = `is_bare_metal`, `gpu_memory_gib` = `gpu_memory_gib` / `gpu_count`
(per GPU; a fractional GPU keeps its share). Azure and GCP GPU types with at least one whole
GPU: `gpu_memory_gib` per GPU from the model name's own suffix (`A100-80GB` -> 80), else from
the `GpuInfo` `SizeInMiB` of GCP's accelerator row of the same name (`A100` 40, `H100` 80, `T4`
16, `L4` 24, ...); models neither states (Azure `A10`, `MI25`, ...) are left empty. Family,
generation, size and CPU maker are not stored: the broker derives them from the type name
(docs/solver.md, "Instance requirements").

## Build summary (row counts)

```
{summary}
```

## Skipped and repaired items (builder log)

```
{log}
```
"""


def sources_md(log: Sequence[str], summary: Sequence[str]) -> str:
    return SOURCES_TEMPLATE.format(ccf=CCF_COMMIT, summary="\n".join(summary), log="\n".join(log))


# --------------------------------------------------------------------------- writing


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, str]]) -> int:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    n = 0
    for r in rows:
        w.writerow(r)
        n += 1
    data = buf.getvalue().encode("utf-8")
    if path.suffix == ".gz":
        with (
            path.open("wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
        ):
            gz.write(data)
    else:
        path.write_bytes(data)
    return n


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True, help="shared data folder")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("snapshot"))
    ns = ap.parse_args(argv)
    data: Path = ns.data
    out: Path = ns.out
    out.mkdir(parents=True, exist_ok=True)
    rep = Report()

    sites = build_sites(data, rep)
    site_ids = {s["id"] for s in sites}
    pools = build_aws_pools(data, site_ids, rep) + build_azure_pools(data, site_ids, rep)
    pools += build_gcp_pools(data, site_ids, rep)
    pools.sort(key=lambda p: (p["site"], p["instance_type"], p["capacity_type"]))
    latency = build_latency(data, site_ids, rep)
    egress = build_egress(data, site_ids, rep)
    inet = build_internet_egress(data, site_ids, rep)
    storage = build_storage()
    instance_types = build_instance_types(data, pools)

    n_sites = write_csv(out / "sites.csv", SITE_COLUMNS, sites)
    n_pools = write_csv(out / "pools.csv.gz", POOL_COLUMNS, pools)
    n_lat = write_csv(out / "latency.csv", LATENCY_COLUMNS, latency)
    n_eg = write_csv(out / "egress.csv", ["src", "dst", "usd_per_gb"], egress)
    n_ie = write_csv(out / "internet_egress.csv", ["site", "usd_per_gb"], inet)
    n_st = write_csv(out / "storage.csv", ["provider", "tier", "usd_per_gb_month", "product", "source"], storage)
    n_it = write_csv(out / "instance_types.csv", INSTANCE_TYPE_COLUMNS, instance_types)

    summary: list[str] = []

    def say(line: str) -> None:
        summary.append(line)
        print(line)

    print("\n== snapshot summary ==")
    say(
        f"sites {n_sites}: "
        + ", ".join(f"{k[0]}/{k[1]}={v}" for k, v in sorted(Counter((s["provider"], s["kind"]) for s in sites).items()))
    )
    say(f"sites with carbon: {sum(1 for s in sites if s['carbon_g_per_kwh'])}")
    say(f"pools {n_pools}:")
    for key in ("price_source", "capacity_type", "arch"):
        say(f"  by {key}: " + ", ".join(f"{k}={v}" for k, v in sorted(Counter(p[key] for p in pools).items())))
    say(
        "  by provider/capacity: "
        + ", ".join(
            f"{a}/{b}={v}"
            for (a, b), v in sorted(Counter((p["price_source"], p["capacity_type"]) for p in pools).items())
        )
    )
    arch_types = Counter(
        (p["price_source"], p["arch"])
        for p in {(p["price_source"], p["instance_type"], p["arch"]): p for p in pools}.values()
    )
    say(
        "  distinct instance types by provider/arch: "
        + ", ".join(f"{a}/{b}={v}" for (a, b), v in sorted(arch_types.items()))
    )
    say(f"latency {n_lat}, egress {n_eg}, internet_egress {n_ie}, storage {n_st}, instance_types {n_it}")
    total = sum(f.stat().st_size for f in out.iterdir() if f.is_file() and f.name != "SOURCES.md")
    say(f"total size of data files {total / 1e6:.2f} MB")
    (out / "SOURCES.md").write_text(sources_md(rep.lines, summary), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
