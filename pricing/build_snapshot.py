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
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pricing.build_instance_types import INSTANCE_TYPE_COLUMNS, build_instance_types
from pricing.snapshot_build.common import (
    EGRESS_COLUMNS,
    INTERNET_EGRESS_COLUMNS,
    LATENCY_COLUMNS,
    POOL_COLUMNS,
    SITE_COLUMNS,
    STORAGE_COLUMNS,
    Report,
)
from pricing.snapshot_build.egress import build_egress, build_internet_egress
from pricing.snapshot_build.latency import build_latency
from pricing.snapshot_build.pools import build_aws_pools, build_azure_pools, build_gcp_pools
from pricing.snapshot_build.sites import build_sites
from pricing.snapshot_build.sources_doc import sources_md
from pricing.snapshot_build.storage import build_storage

__all__ = ["POOL_COLUMNS", "main", "write_csv"]


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
    n_eg = write_csv(out / "egress.csv", EGRESS_COLUMNS, egress)
    n_ie = write_csv(out / "internet_egress.csv", INTERNET_EGRESS_COLUMNS, inet)
    n_st = write_csv(out / "storage.csv", STORAGE_COLUMNS, storage)
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
