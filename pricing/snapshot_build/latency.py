"""`latency.csv`: round-trip times between sites, one median and one 95th percentile per pair."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd

from pricing.snapshot_build.common import Report
from pricing.snapshot_build.sites import gcp_zone_to_region

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
