"""What a per-workload placement costs: nodes, storage and egress, as the contract states them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from broker.core.pooltable import FloatArray
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
    load: dict[int, FloatArray] = {}
    need: dict[int, int] = {}
    large: dict[int, FloatArray] = {}
    for (k, p), r in x.items():
        w = workloads[k].w
        size = np.array([w.cpu, w.memory_gib, w.gpus])
        load[p] = load.get(p, np.zeros(3)) + r * size
        cap = np.array([vcpus[p], mem[p], gpus[p]], dtype=np.float64)
        weight = large_replica_table(size, cap)
        large[p] = large.get(p, np.zeros(len(weight))) + r * weight
        fit = min(
            math.floor(vcpus[p] / w.cpu + 1e-9),
            math.floor(mem[p] / w.memory_gib + 1e-9),
            math.floor(gpus[p] / w.gpus + 1e-9) if w.gpus > 0 else 10**9,
            w.max_per_node or 10**9,
        )
        need[p] = max(need.get(p, 0), math.ceil(r / max(fit, 1)))
    out: dict[int, int] = {}
    for p, ld in load.items():
        caps = np.array([vcpus[p], mem[p], max(float(gpus[p]), 1e-12)])
        out[p] = max(1, math.ceil(float(np.max(ld / caps)) - 1e-9), need[p], math.ceil(float(large[p].max()) - 1e-9))
    return out


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
