"""Per-assignment explanations: cost share, binding constraints, next best choice.

A constraint binds when dropping it alone would offer a cheaper home for the
workload; homes are compared by what a replica costs when the workload runs
alone on whole nodes of a pool (node sharing aside, what a user would pay).
"""

from __future__ import annotations

import numpy as np

from broker.domain import Assignment, Explanation, Workload
from broker.pooltable import BoolArray, FloatArray, PoolTable
from broker.solver.baseline import Placement
from broker.solver.classes import SPOT, WorkloadData
from broker.solver.filters import NamedMask
from broker.solver.problem import PlacementProblem
from broker.solver.risk import interruption_risk_month, risk_adjusted

# constraints whose relaxation says something a user can act on
_ACTIONABLE = {"residency", "latency", "capacity_type", "provider", "arch", "gpu_model"}


def _cheapest(frac: np.ndarray, mask: np.ndarray) -> float:
    return float(frac[mask].min()) if mask.any() else float("inf")


def explain_assignments(
    problem: PlacementProblem,
    workloads: list[WorkloadData],
    masks_by_w: list[list[NamedMask]],
    x: Placement,
    nodes: dict[int, int],
    *,
    node_cost: FloatArray,
) -> tuple[Assignment, ...]:
    t = problem.table
    # pool load, to split a shared node's cost between its workloads
    load: dict[int, np.ndarray] = {}
    for (k, p), r in x.items():
        w = workloads[k].w
        load.setdefault(p, np.zeros(3))
        load[p] += r * np.array([w.cpu, w.memory_gib, w.gpus])

    rows: list[Assignment] = []
    usable = ~t.dominated
    by_workload: dict[int, list[tuple[int, int]]] = {}
    for (k, p), r in x.items():
        by_workload.setdefault(k, []).append((p, r))
    # equal signatures and replica counts give equal answers: compute once
    memo: dict[tuple[object, ...], tuple[np.ndarray, tuple[int, int], list[str]]] = {}
    for k, wd in enumerate(workloads):
        w = wd.w
        masks = masks_by_w[k]
        key = (wd.signature, w.replicas)
        if key not in memo:
            memo[key] = _homes(t, w, masks, usable, node_cost)
        frac, (best1, best2), binding_base = memo[key]
        binding = list(binding_base)
        used_sites = {int(t.site_idx[p]) for p, _ in by_workload.get(k, [])}
        if w.min_sites > 1 and len(used_sites) == w.min_sites:
            binding.append(f"spread.min_sites>={w.min_sites} on {w.name}")

        for p, r in sorted(by_workload.get(k, []), key=lambda pr: t.pools[pr[0]].id):
            site = int(t.site_idx[p])
            caps = np.array([t.vcpus[p], t.memory_gib[p], max(t.gpus[p], 1e-9)])
            mine = r * np.array([w.cpu, w.memory_gib, w.gpus]) / caps
            total = load[p] / caps
            dims = total > 0
            portion = float((mine[dims] / total[dims]).mean()) if dims.any() else 1.0
            compute = portion * nodes[p] * float(t.price[p])
            storage = r * float(problem.storage_per_replica_hour(w.storage_gib, w.storage_tier)[site])
            row_binding = list(binding)
            if np.isfinite(t.max_nodes[p]) and nodes[p] >= t.max_nodes[p]:
                row_binding.append(f"capacity:{t.pools[p].id} max_nodes={int(t.max_nodes[p])}")
            j = best1 if best1 >= 0 and int(t.site_idx[best1]) != site else best2
            next_best = None
            extra = None
            if j >= 0:
                next_best = t.pools[j].id
                extra = round(float(frac[j] - frac[p]) * r, 6)
            latency = {
                name: round(float(rtt[site]), 1) for name, rtt in problem.user_rtt.items() if np.isfinite(rtt[site])
            }
            rows.append(
                Assignment(
                    workload=w.name,
                    pool=t.pools[p].id,
                    site=t.sites[site].id,
                    replicas=r,
                    latency_ms=latency,
                    explanation=Explanation(
                        cost_per_hour=round(compute + storage, 6),
                        binding=tuple(row_binding),
                        next_best=next_best,
                        next_best_extra_per_hour=extra,
                        cost_breakdown=_breakdown(t, p, compute, storage),
                    ),
                )
            )
    return tuple(rows)


def _homes(
    t: PoolTable, w: Workload, masks: list[NamedMask], usable: BoolArray, node_cost: FloatArray
) -> tuple[np.ndarray, tuple[int, int], list[str]]:
    """Per pool: what a replica costs when the workload runs alone on whole nodes; the cheapest
    allowed pool and the cheapest at another site (next best homes); the actionable constraints
    whose removal alone would offer a cheaper home."""
    # only pools a replica fits and no other pool dominates can be a home: work on those
    idx = np.flatnonzero(usable & masks[0].mask) if masks and masks[0].reason == "size" else np.flatnonzero(usable)
    sub = [m.mask[idx] for m in masks]
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.floor(np.minimum(t.vcpus[idx] / w.cpu, t.memory_gib[idx] / w.memory_gib) + 1e-9)
        if w.gpus > 0:
            fit = np.minimum(fit, np.floor(t.gpus[idx] / w.gpus + 1e-9))
        local = np.where(fit >= 1, np.ceil(w.replicas / np.maximum(fit, 1)) * node_cost[idx] / w.replicas, np.inf)

    def allowed_by(parts: list[BoolArray]) -> BoolArray:
        ok = np.ones(len(idx), dtype=bool)
        for part in parts:
            ok &= part
        return ok

    all_ok = allowed_by(sub)
    best_allowed = _cheapest(local, all_ok)
    binding: list[str] = []
    for i, m in enumerate(masks):
        if m.reason not in _ACTIONABLE:
            continue
        if _cheapest(local, allowed_by(sub[:i] + sub[i + 1 :])) < best_allowed - 1e-9:
            binding.append(m.label)
    frac = np.full(t.n_pools, np.inf)
    frac[idx] = local
    allowed = idx[all_ok & np.isfinite(local)]
    best1 = best2 = -1
    if len(allowed):
        best1 = int(allowed[np.argmin(frac[allowed])])
        other = allowed[t.site_idx[allowed] != t.site_idx[best1]]
        if len(other):
            best2 = int(other[np.argmin(frac[other])])
    return frac, (best1, best2), binding


def _breakdown(t: PoolTable, p: int, compute: float, storage: float) -> dict[str, float]:
    out = {"compute": round(compute, 6), "storage": round(storage, 6)}
    if int(t.cap_idx[p]) == SPOT:
        risk = interruption_risk_month(str(t.site_provider[int(t.site_idx[p])]), float(t.vcpus[p]))
        out["spot_interruption_risk_month"] = round(risk, 4)
        out["risk_adjusted_compute"] = round(risk_adjusted(compute, risk), 6)
    return out
