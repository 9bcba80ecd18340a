"""What a per-workload placement costs: nodes, storage and egress, as the contract states them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.prepare.classes import WorkloadData, large_replica_table
from broker.solver.problem import GIB_IN_GB, PlacementProblem
from broker.solver.types import Placement


def placement_nodes(
    workloads: Sequence[WorkloadData], x: Placement, *, vcpus: FloatArray, mem: FloatArray, gpus: FloatArray
) -> dict[int, int]:
    """Nodes per pool shared by all workloads on it: enough for the aggregate of cpu, memory
    and GPUs (the contract's rule), for each workload's replicas one node at a time, and the
    sum of the replicas' large-replica weights for k = 1, 2 (above half, above a third of a node:
    classes.large_replica_weights). Every packing needs at least this many."""
    if not x:
        return {}
    pairs = np.array(list(x), dtype=np.int64).reshape(-1, 2)
    k, pool = pairs[:, 0], pairs[:, 1]
    r = np.fromiter(x.values(), dtype=np.float64, count=len(x))
    size = np.array([[workloads[i].w.cpu, workloads[i].w.memory_gib, workloads[i].w.gpus] for i in k.tolist()])
    limit = np.array([workloads[i].w.max_per_node or 10**9 for i in k.tolist()], dtype=np.float64)
    cap = np.stack([vcpus[pool], mem[pool], gpus[pool]], axis=1).astype(np.float64)
    with np.errstate(divide="ignore"):
        per_node = np.floor(np.where(size > 0, cap / np.where(size > 0, size, 1.0), np.inf) + 1e-9)
    fit = np.maximum(np.minimum(per_node.min(axis=1), limit), 1.0)
    pools, at = np.unique(pool, return_inverse=True)
    load = np.zeros((len(pools), 3))
    np.add.at(load, at, r[:, None] * size)
    weights = large_replica_table(size, cap)
    large = np.zeros((len(pools), weights.shape[1]))
    np.add.at(large, at, r[:, None] * weights)
    need = np.zeros(len(pools))
    np.maximum.at(need, at, np.ceil(r / fit))
    return nodes_needed(pools, load, large, need, vcpus=vcpus, mem=mem, gpus=gpus)


def nodes_needed(
    pools: IntArray, load: FloatArray, large: FloatArray, need: FloatArray, *, vcpus: FloatArray, mem: FloatArray,
    gpus: FloatArray,
) -> dict[int, int]:  # fmt: skip
    """Per pool (`pools[i]`, its totals in row i): the most of its load over one node's capacity,
    `need`, its large-replica weights, each rounded up, and 1."""
    caps = np.stack([vcpus[pools], mem[pools], np.maximum(gpus[pools], 1e-12)], axis=1)
    agg = np.ceil((load / caps).max(axis=1) - 1e-9)
    heavy = np.ceil(large.max(axis=1, initial=0.0) - 1e-9)
    count = np.maximum.reduce([np.ones(len(pools)), agg, need, heavy]).astype(np.int64)
    return dict(zip(pools.tolist(), count.tolist(), strict=True))


def storage_cost(problem: PlacementProblem, workloads: Sequence[WorkloadData], x: Placement) -> float:
    t = problem.table
    total = 0.0
    memo: dict[tuple[float, object], FloatArray] = {}
    for (k, p), r in x.items():
        w = workloads[k].w
        if w.storage_gib > 0:
            key = (w.storage_gib, w.storage_tier)
            if key not in memo:
                memo[key] = problem.storage_per_replica_hour(w.storage_gib, w.storage_tier)
            total += r * float(memo[key][t.site_idx[p]])
    return total


def site_fractions(
    problem: PlacementProblem, workloads: Sequence[WorkloadData], x: Placement
) -> list[dict[int, float]]:
    out: list[dict[int, float]] = [{} for _ in workloads]
    for (k, p), r in x.items():
        s = int(problem.table.site_idx[p])
        out[k][s] = out[k].get(s, 0.0) + r / workloads[k].w.replicas
    return out


def egress_cost(
    problem: PlacementProblem, workloads: Sequence[WorkloadData], x: Placement, name_index: dict[str, int]
) -> float:
    """Traffic of w that v's replicas at the same site cannot absorb leaves the site for the
    cheapest site where v runs (locality-aware routing, as service meshes send overflow to the
    nearest healthy peer). The model prices it no higher, so its bound stays valid."""
    deps = [(k, name_index[d.workload], d.gib_per_hour) for k, wd in enumerate(workloads) for d in wd.w.depends_on]
    if not deps:
        return 0.0
    return routed_egress(site_fractions(problem, workloads, x), deps, problem.egress_matrix())


def routed_egress(
    frac: Sequence[dict[int, float]], deps: Sequence[tuple[int, int, float]], egress: FloatArray
) -> float:
    """USD/h of the traffic (sender k, peer v, GiB/h) given each one's share of replicas per site."""
    total = 0.0
    for k, v, gib in deps:
        for s, f in frac[k].items():
            leaving = f - frac[v].get(s, 0.0)
            others = [t for t in frac[v] if t != s]
            if leaving > 1e-12 and others:
                total += gib * GIB_IN_GB * leaving * float(egress[s, others].min())
    return total
