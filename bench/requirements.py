"""Instance requirements over the full public catalog: the cost of the pool attributes and of the
candidate filters with and without requirements. Prints one comparable figure per line:

    python bench/requirements.py [--repeat 7] [--root PATH] [--database-url URL]

With `--database-url` (a database `broker catalog load` filled) it also times `Broker.place` of
the same request with and without the two requirements: a request with requirements solves over
every pool, dominated ones included (Catalog.table_for).

`--root` runs the filters of another checkout (e.g. main, before requirements existed) on the
same catalog, for a side-by-side "before"; that checkout has no attributes, so only the
filters without requirements are timed there.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--database-url", default=None)
    return ap.parse_args()


ARGS = _args()
sys.path.insert(0, str(ARGS.root))

import numpy as np  # noqa: E402

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind, Workload  # noqa: E402
from broker.core.pooltable import build_pool_table  # noqa: E402
from broker.solver.prepare.filters import combine, workload_filters  # noqa: E402
from broker.solver.problem import PlacementProblem, PlacementRequest  # noqa: E402
from pricing import snapshot  # noqa: E402

HAS_REQUIREMENTS = hasattr(Workload, "requirements")


def catalog() -> tuple[list[Site], list[Pool], dict[Any, Any]]:
    sites = [
        Site(s["id"], s["provider"], SiteKind(s["kind"]), s["region"], s["country"], s["jurisdictions"], s["lat"],
             s["lon"], s["carbon_g_per_kwh"], s["name"])
        for s in snapshot.read_sites()
    ]  # fmt: skip
    df = snapshot.read_pools()
    ids = {s.id for s in sites}
    pools = [
        Pool(f"{site}/{it}/{ct}", site, it, CapacityType(ct), Arch(arch), float(v), float(m),
             float(g) if g == g else 0.0, gm if isinstance(gm, str) and gm else None, float(price), None, "x", "x")
        for site, it, ct, arch, v, m, g, gm, price in zip(
            df["site"].tolist(), df["instance_type"].tolist(), df["capacity_type"].tolist(), df["arch"].tolist(),
            df["vcpus"].tolist(), df["memory_gib"].tolist(), df["gpus"].tolist(), df["gpu_model"].tolist(),
            df["price_per_hour"].tolist(), strict=True,
        )
        if site in ids
    ]  # fmt: skip
    facts: dict[Any, Any] = {}
    if HAS_REQUIREMENTS:
        from broker.catalog.store import instance_facts

        facts = instance_facts()
    return sites, pools, facts


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000.0, out


def main() -> None:
    sites, pools, facts = catalog()
    table = build_pool_table(sites, pools, facts) if HAS_REQUIREMENTS else build_pool_table(sites, pools)
    print(f"root {ARGS.root}")
    print(f"pools {table.n_pools}")
    plain = Workload("api", 6, 2.0, 4.0, capacity_types=(CapacityType.ONDEMAND,))
    cases: list[tuple[str, Workload]] = [("no requirements", plain)]
    if HAS_REQUIREMENTS:
        from broker.core.requirements import Requirement

        t0 = time.perf_counter()
        _ = table.attributes
        print(f"attributes of all pools, built once per catalog version: {(time.perf_counter() - t0) * 1000:.0f} ms")
        compact = table.compact()
        t0 = time.perf_counter()
        _ = compact.attributes
        print(f"attributes of the {compact.n_pools} non-dominated pools: {(time.perf_counter() - t0) * 1000:.0f} ms")
        two = (
            Requirement.parse("karpenter.k8s.aws/instance-family", "In", ["m7i", "m7a"]),
            Requirement.parse("instance-generation", "Gt", ["5"]),
        )
        five = (
            *two,
            Requirement.parse("karpenter.k8s.aws/instance-cpu-manufacturer", "NotIn", ["aws"]),
            Requirement.parse("karpenter.k8s.aws/instance-memory", "Gt", ["4096"]),
            Requirement.parse("gpu_name", "DoesNotExist", []),
        )
        cases += [
            ("2 requirements", Workload("api", 6, 2.0, 4.0, capacity_types=plain.capacity_types, requirements=two)),
            ("5 requirements", Workload("api", 6, 2.0, 4.0, capacity_types=plain.capacity_types, requirements=five)),
        ]
    for label, w in cases:
        problem = PlacementProblem(
            request=PlacementRequest(name="b", workloads=(w,)),
            table=table,
            user_rtt={},
            egress_usd_per_gb=np.zeros((table.n_sites, table.n_sites)),
            internet_egress_usd_per_gb=np.zeros(table.n_sites),
            storage_usd_per_gb_month=np.zeros((table.n_sites, 3)),
        )
        ms, masks = timed(lambda p=problem, w=w: workload_filters(p, w, None), ARGS.repeat)
        allowed = int(combine(masks, table.n_pools).sum())
        print(f"filters, full catalog, {label} (median of {ARGS.repeat}): {ms:.1f} ms, {allowed} pools allowed")
    if ARGS.database_url and HAS_REQUIREMENTS:
        place(ARGS.database_url)


def place(url: str) -> None:
    from broker.app import Broker
    from broker.settings import Settings

    broker = Broker.open(Settings(database_url=url))
    _ = broker.catalog().table.attributes
    w = {"name": "api", "replicas": 6, "cpu": 2.0, "memory_gib": 4.0, "capacity_types": ["ondemand"]}
    reqs = [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7i", "m7a"]},
        {"key": "instance-generation", "operator": "Gt", "values": ["5"]},
    ]
    for label, doc in (
        ("no requirements", {"name": "b", "dry_run": True, "workloads": [w]}),
        ("2 requirements", {"name": "b", "dry_run": True, "workloads": [{**w, "requirements": reqs}]}),
    ):
        ms, (placement, _) = timed(lambda d=doc: broker.place(d), ARGS.repeat)
        print(f"Broker.place, 1 workload, {label} (median of {ARGS.repeat}): {ms:.0f} ms, "
              f"{placement.result.cost_per_hour:.4f} $/h")  # fmt: skip


if __name__ == "__main__":
    main()
