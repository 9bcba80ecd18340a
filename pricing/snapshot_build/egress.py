"""`egress.csv` and `internet_egress.csv`: what a GB leaving a site costs, to another site or to the internet."""

from __future__ import annotations

import statistics
from decimal import Decimal
from pathlib import Path

from pricing.snapshot_build.common import Report, dec_str, positive_price, read_csv_str
from pricing.snapshot_build.sites import gcp_zone_to_region


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
