"""Migration-plan and manifest benchmark (issue 6): one comparable figure per line.

Builds an old and a new placement of W workloads (a dependency chain, R
replicas each) over real pools of the bundled snapshot spread across sites,
moves about half of every workload to other sites, and times:

    migration_plan_ms <replicas>   plan + rollback plan (target: < 1000 ms for 200+ replicas)
    manifests_ms <replicas>        Deployments for every assignment
    validate_ms <manifests>        strict Kubernetes schema validation of all of them

and the wave schedule (issue 24 item 4), each workload capped at --max-unavailable replicas
starting or stopping at once, the plan at --budget:

    migration_makespan_s <replicas> <planner> <s>      advisory: today's waves one after the other
                                                       (it knows only --budget); advisory_capped: the
                                                       same with the cap as its budget (the fallback);
                                                       scheduled: CP-SAT (or the list schedule)
    migration_makespan_lower_bound_s <replicas> <s>
    migration_schedule_ms <replicas> <ms>, migration_schedule_engine <replicas> <engine> <status>
    migration_max_unavailable <replicas> <planner> <peak> cap <n> <ok|over>

    python bench/migration.py [--workloads 12] [--replicas 20] [--budget 10] [--max-unavailable 4]
    python bench/migration.py --workloads 100    # the 2,000-replica case
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
from broker.dispatch.migration import MigrationPlan, Slot, Step, plan_migration, state_after
from broker.dispatch.schema import problems
from broker.dispatch.wave_schedule import Timing, advisory_times, durations

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
    ap.add_argument("--max-unavailable", type=int, default=4)
    ap.add_argument("--time-limit", type=float, default=1.0, help="CP-SAT's time box, seconds")
    args = ap.parse_args()
    old, new = placements(args.workloads, args.replicas, args.seed)
    n = sum(s.replicas for s in old)
    deps = {f"svc-{w:02d}": [f"svc-{w + 1:02d}"] for w in range(args.workloads - 1)}  # a call chain

    t = time.perf_counter()
    plan = plan_migration(
        old, new, depends_on=deps, disruption_budget=args.budget, cost_per_moved_replica=0.05, schedule="none"
    )
    plan_ms = (time.perf_counter() - t) * 1000
    assert sorted((s.workload, s.pool, s.replicas) for s in state_after(old, plan.steps, len(plan.steps))) == sorted(
        (s.workload, s.pool, s.replicas) for s in new
    )
    print(f"migration_plan_ms {n} {plan_ms:.1f}")
    print(f"migration_steps {n} {len(plan.steps)}")
    print(f"migration_waves {n} {plan.waves}")
    print(f"migration_moved_replicas {n} {plan.moved_replicas}")
    schedules(old, new, deps, plan, n, args)

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


def peak_in_transition(steps: list[Step], times: list[tuple[int, int]]) -> dict[str, int]:
    """Per workload, the most replicas starting or stopping at one moment."""
    peak: dict[str, int] = {}
    for t in sorted({a for a, _ in times}):
        now: dict[str, int] = {}
        for s, (a, b) in zip(steps, times, strict=True):
            if a <= t < b and s.action != "shift_traffic":
                now[s.workload] = now.get(s.workload, 0) + abs(s.to_replicas - s.from_replicas)
        for w, k in now.items():
            peak[w] = max(peak.get(w, 0), k)
    return peak


def schedules(
    old: list[Slot], new: list[Slot], deps: dict[str, list[str]], advisory: MigrationPlan, n: int, args: Any
) -> None:
    cap = args.max_unavailable
    caps = {s.workload: cap for s in (*old, *new)}
    steps = list(advisory.steps)
    times = advisory_times(steps, durations(steps, Timing(), ()))
    rows = [("advisory", max(b for _, b in times), peak_in_transition(steps, times))]
    for engine, name in (("advisory", "advisory_capped"), ("cp-sat", "scheduled")):
        t = time.perf_counter()
        plan = plan_migration(
            old, new, depends_on=deps, disruption_budget=args.budget, max_unavailable=caps,
            schedule=engine, schedule_time_limit_s=args.time_limit, with_rollback=False,
        )  # fmt: skip
        ms = (time.perf_counter() - t) * 1000
        assert plan.schedule is not None
        timed = [(s.start_s or 0, s.end_s or 0) for s in plan.steps]
        rows.append((name, plan.schedule.makespan_s, peak_in_transition(list(plan.steps), timed)))
        if engine == "cp-sat":
            print(f"migration_makespan_lower_bound_s {n} {plan.schedule.lower_bound_s}")
            print(f"migration_schedule_ms {n} {ms:.0f}")
            print(f"migration_schedule_engine {n} {plan.schedule.engine} {plan.schedule.status.replace(' ', '_')}")
    for name, makespan, _ in rows:
        print(f"migration_makespan_s {n} {name} {makespan}")
    for name, _, peak in rows:
        worst = max(peak.values(), default=0)
        print(f"migration_max_unavailable {n} {name} {worst} cap {cap} {'ok' if worst <= cap else 'over'}")


def request_names(request: dict[str, Any]) -> list[str]:
    return [w["name"] for w in request["workloads"]]


if __name__ == "__main__":
    main()
