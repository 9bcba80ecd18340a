"""Exact packing on the generated bench requests (bench/solver.py's 12 / 300 / 3,000 workloads):
what packing every replica onto a concrete node changed in the aggregate answer, and first-fit
decreasing against CP-SAT pool by pool. Prints one comparable figure per line per size:

    python bench/packing.py [--sizes 12,300,3000] [--time-limit 30] [--cp-sat-s 2]

Per size: the answer's cost and gap before packing (the aggregate capacity rule) and after,
the node counts, replicas moved, pools packed and how many proven minimal, the packing time
inside the solve; then, on the answer's pools again outside the solve, FFD alone and CP-SAT
with `--cp-sat-s` per pool FFD does not prove minimal: nodes and time of each. Every answer's
node assignments are checked (no node over capacity, every replica once, counts equal `nodes`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.solver import generate, service_problem
from broker.app import Broker
from broker.settings import Settings
from broker.solver import PlacementProblem, solve
from broker.solver.answer.bin_packing import cp_sat_size, improve, pack_pool
from broker.solver_runtime import solver_options


def check(problem: PlacementProblem, res) -> int:  # type: ignore[no-untyped-def]
    """Problems found in the answer's node assignments (0 = it packs)."""
    t = problem.table
    bad = 0
    placed: dict[tuple[str, str], int] = defaultdict(int)
    per_pool: dict[str, int] = defaultdict(int)
    size = {w.name: (w.cpu, w.memory_gib, w.gpus) for w in problem.request.workloads}
    for node in res.node_assignments:
        p = t.pool_index[node.pool]
        load = np.zeros(3)
        for r in node.replicas:
            load += r.replicas * np.array(size[r.workload])
            placed[(r.workload, node.pool)] += r.replicas
        cap = np.array([t.vcpus[p], t.memory_gib[p], t.gpus[p]])
        bad += int((load > cap + 1e-6).any())
        per_pool[node.pool] += 1
    bad += sum(placed[(a.workload, a.pool)] != a.replicas for a in res.assignments)
    bad += sum(per_pool[n.pool] != n.count for n in res.nodes)
    return bad


def engines(problem: PlacementProblem, res, cp_sat_s: float, max_vars: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """FFD and CP-SAT on the answer's pools, each timed."""
    t = problem.table
    size = {w.name: (w.cpu, w.memory_gib, w.gpus) for w in problem.request.workloads}
    by_pool: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for a in res.assignments:
        by_pool[a.pool].append((a.workload, a.replicas))
    out = {"ffd_nodes": 0.0, "cp_sat_nodes": 0.0, "lower_bound_nodes": 0.0, "ffd_s": 0.0, "cp_sat_s": 0.0}
    out |= {"pools_ffd_proven": 0.0, "pools_cp_sat_ran": 0.0, "pools_cp_sat_optimal": 0.0, "pools_cp_sat_better": 0.0}
    for pool, items in sorted(by_pool.items()):
        p = t.pool_index[pool]
        counts = [r for _, r in sorted(items)]
        sizes = np.array([size[w] for w, _ in sorted(items)], dtype=float)
        cap = np.array([t.vcpus[p], t.memory_gib[p], t.gpus[p]])
        t0 = time.perf_counter()
        pk = pack_pool(counts, sizes, cap)
        out["ffd_s"] += time.perf_counter() - t0
        out["ffd_nodes"] += len(pk.nodes)
        out["lower_bound_nodes"] += pk.lower
        out["pools_ffd_proven"] += pk.proven
        best = pk
        if not pk.proven and cp_sat_size(len(counts), len(pk.nodes)) <= max_vars:
            t0 = time.perf_counter()
            best = improve(pk, counts, sizes, cap, time_s=cp_sat_s)
            out["cp_sat_s"] += time.perf_counter() - t0
            out["pools_cp_sat_ran"] += 1
            out["pools_cp_sat_optimal"] += best.proven
            out["pools_cp_sat_better"] += len(best.nodes) < len(pk.nodes)
        out["cp_sat_nodes"] += len(best.nodes)
    out["pools"] = float(len(by_pool))
    return out


NODE_SHAPES = [(2, 4), (2, 8), (4, 8), (4, 16), (8, 16), (8, 32), (16, 64), (4, 32)]  # (vCPUs, GiB)
REPLICA_SHAPES = [(0.25, 0.5), (0.5, 1), (1, 2), (1, 4), (1.5, 3), (2, 4), (2, 8), (3, 6), (0.5, 3), (1, 6)]


def random_pools(n: int, cp_sat_s: float, seed: int = 11) -> dict[str, float]:
    """FFD against CP-SAT on `n` seeded pools of a few replica shapes on small nodes (where
    fragmentation shows): how often FFD is proven minimal, how often and by how much CP-SAT
    does better, and the time of each."""
    rnd = np.random.default_rng(seed)
    out = {"pools": float(n), "ffd_nodes": 0.0, "cp_sat_nodes": 0.0, "ffd_s": 0.0, "cp_sat_s": 0.0}
    out |= {"ffd_proven": 0.0, "cp_sat_ran": 0.0, "cp_sat_optimal": 0.0, "cp_sat_better": 0.0}
    for _ in range(n):
        v, m = NODE_SHAPES[rnd.integers(len(NODE_SHAPES))]
        cap = np.array([v, m, 0.0])
        picks = rnd.choice(len(REPLICA_SHAPES), size=int(rnd.integers(2, 7)), replace=False)
        sizes = np.array([[*REPLICA_SHAPES[i], 0.0] for i in picks])
        ok = (sizes[:, :2] <= cap[:2]).all(axis=1)
        sizes = sizes[ok]
        if not len(sizes):
            continue
        counts = [int(c) for c in rnd.integers(1, 13, size=len(sizes))]
        t0 = time.perf_counter()
        pk = pack_pool(counts, sizes, cap)
        out["ffd_s"] += time.perf_counter() - t0
        out["ffd_nodes"] += len(pk.nodes)
        out["ffd_proven"] += pk.proven
        best = pk
        if not pk.proven:
            t0 = time.perf_counter()
            best = improve(pk, counts, sizes, cap, time_s=cp_sat_s)
            out["cp_sat_s"] += time.perf_counter() - t0
            out["cp_sat_ran"] += 1
            out["cp_sat_optimal"] += best.proven
            out["cp_sat_better"] += len(best.nodes) < len(pk.nodes)
        out["cp_sat_nodes"] += len(best.nodes)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="12,300,3000")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--cp-sat-s", type=float, default=2.0, help="CP-SAT's time per pool in the side-by-side")
    ap.add_argument("--random", type=int, default=500, help="seeded random pools for FFD vs CP-SAT (0: none)")
    args = ap.parse_args()
    if args.random:
        for k, v in random_pools(args.random, args.cp_sat_s).items():
            print(f"random.{k}: {round(v, 3) if not float(v).is_integer() else int(v)}")
        sys.stdout.flush()
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    broker = Broker.open(Settings(database_url=url))
    broker.catalog()
    options = solver_options(broker.settings)
    for n in (int(s) for s in args.sizes.split(",") if s):
        doc = generate(n)
        problem = service_problem(broker, doc)
        res = solve(problem, time_limit_s=args.time_limit, seed=0, options=options)
        pk = res.packing
        assert pk is not None
        rows: dict[str, object] = {
            "cost_before_packing_per_hour": pk.aggregate_cost_per_hour,
            "cost_after_packing_per_hour": res.cost_per_hour,
            "cost_change_pct": round((res.cost_per_hour / pk.aggregate_cost_per_hour - 1) * 100, 4),
            "gap_before_packing_pct": pk.aggregate_gap_pct,
            "gap_after_packing_pct": res.gap_pct,
            "nodes_aggregate_rule": pk.aggregate_nodes,
            "nodes_packed": pk.nodes,
            "replicas_moved": pk.moved_replicas,
            "pools": pk.pools,
            "pools_proven_minimal": pk.pools_proven,
            "pools_cp_sat_in_solve": pk.pools_cp_sat,
            "pools_cp_sat_better_in_solve": pk.pools_cp_sat_better,
            "packing_ms_in_solve": pk.packing_ms,
            "solve_ms": res.solve_ms,
            "node_assignment_violations": check(problem, res),
        }
        side = engines(problem, res, args.cp_sat_s, options.packing_max_vars)
        rows |= {f"side_by_side.{k}": round(v, 3) if isinstance(v, float) and not v.is_integer() else int(v)
                 for k, v in side.items()}  # fmt: skip
        for k, v in rows.items():
            print(f"{n}.{k}: {v}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
