"""Migration-plan and manifest benchmark (issue 6): one comparable figure per line.

Builds an old and a new placement of W workloads (a dependency chain, R
replicas each) over real pools of the bundled snapshot spread across sites,
moves about half of every workload to other sites, and times:

    migration_plan_ms <replicas>   plan + rollback plan (target: < 1000 ms for 200+ replicas)
    manifests_ms <replicas>        Deployments for every assignment
    validate_ms <manifests>        strict Kubernetes schema validation of all of them

    python bench/migration.py [--workloads 12] [--replicas 20] [--budget 10]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import pandas as pd

from broker.core.domain import Assignment, Baseline, Explanation, PlacementResult
from broker.core.placement import Placement
from broker.dispatch.manifests import Target, build_bundles, total_replicas
from broker.dispatch.migration import Slot, plan_migration, state_after
from broker.dispatch.schema import problems

SNAPSHOT = Path(__file__).resolve().parents[1] / "pricing" / "snapshot" / "pools.csv.gz"


def real_pools(n_sites: int, seed: int) -> list[tuple[str, str]]:
    df = pd.read_csv(SNAPSHOT, usecols=["site", "instance_type", "capacity_type"])
    df = df[df["site"].str.startswith(("aws:eu-", "azure:", "gcp:europe-"))]
    rng = random.Random(seed)
    sites = rng.sample(sorted(df["site"].unique()), n_sites)
    pools = df[df["site"].isin(sites)].groupby("site").head(4)
    return [(str(r.site), f"{r.site}/{r.instance_type}/{r.capacity_type}") for r in pools.itertuples()]


def placements(workloads: int, replicas: int, seed: int) -> tuple[list[Slot], list[Slot]]:
    rng = random.Random(seed)
    pools = real_pools(12, seed)
    old, new = [], []
    for w in range(workloads):
        name = f"svc-{w:02d}"
        a, b, c = rng.sample(pools, 3)
        half = replicas // 2
        old += [Slot(name, a[1], a[0], half), Slot(name, b[1], b[0], replicas - half)]
        new += [Slot(name, a[1], a[0], replicas - half - 2), Slot(name, c[1], c[0], half + 2)]
    return old, new


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", type=int, default=12)
    ap.add_argument("--replicas", type=int, default=20)
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    old, new = placements(args.workloads, args.replicas, args.seed)
    n = sum(s.replicas for s in old)
    deps = {f"svc-{w:02d}": [f"svc-{w + 1:02d}"] for w in range(args.workloads - 1)}  # a call chain

    t = time.perf_counter()
    plan = plan_migration(old, new, depends_on=deps, disruption_budget=args.budget, cost_per_moved_replica=0.05)
    plan_ms = (time.perf_counter() - t) * 1000
    assert sorted((s.workload, s.pool, s.replicas) for s in state_after(old, plan.steps, len(plan.steps))) == sorted(
        (s.workload, s.pool, s.replicas) for s in new
    )
    print(f"migration_plan_ms {n} {plan_ms:.1f}")
    print(f"migration_steps {n} {len(plan.steps)}")
    print(f"migration_waves {n} {plan.waves}")
    print(f"migration_moved_replicas {n} {plan.moved_replicas}")

    request = {"workloads": [{"name": f"svc-{w:02d}", "cpu": 1, "memory_gib": 2} for w in range(args.workloads)]}
    assignments = tuple(Assignment(s.workload, s.pool, s.site, s.replicas, {}, Explanation(0.0, (), None)) for s in new)
    result = PlacementResult("optimal", 0.0, 0.0, 0.0, 0.0, Baseline("none", None), None, 0, (), assignments)
    placement = Placement(name="bench", tenant="bench", result=result, request=request, id="pl_BENCH")
    targets = {s.site: [Target("k-" + s.site.replace(":", "-"), s.site, "bench")] for s in new}
    t = time.perf_counter()
    bundles = build_bundles(placement, targets)
    print(f"manifests_ms {n} {(time.perf_counter() - t) * 1000:.1f}")
    assert total_replicas(bundles) == {w: args.replicas for w in request_names(request)}
    manifests = [m for b in bundles for m in b.manifests]
    t = time.perf_counter()
    bad = [p for m in manifests for p in problems(m)]
    print(f"validate_ms {len(manifests)} {(time.perf_counter() - t) * 1000:.1f}")
    assert not bad, bad[:3]


def request_names(request: dict[str, Any]) -> list[str]:
    return [w["name"] for w in request["workloads"]]


if __name__ == "__main__":
    main()
