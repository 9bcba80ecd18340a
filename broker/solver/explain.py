"""Per-assignment explanations: cost share, binding constraints, next best choice.

A constraint binds when dropping it alone would offer a cheaper home for the
workload; homes are compared by what a replica costs when the workload runs
alone on whole nodes of a pool (node sharing aside, what a user would pay).
"""

from __future__ import annotations

import numpy as np

from broker.domain import Assignment, Explanation
from broker.solver.baseline import Placement
from broker.solver.filters import NamedMask, combine
from broker.solver.model import ModelInput
from broker.solver.problem import PlacementProblem

# constraints whose relaxation says something a user can act on
_ACTIONABLE = {"residency", "latency", "capacity_type", "provider", "arch", "gpu_model"}


def _cheapest(frac: np.ndarray, mask: np.ndarray) -> float:
    return float(frac[mask].min()) if mask.any() else float("inf")


def explain_assignments(
    problem: PlacementProblem,
    mi: ModelInput,
    masks_by_w: list[list[NamedMask]],
    x: Placement,
    nodes: dict[int, int],
) -> tuple[Assignment, ...]:
    t = problem.table
    # pool load, to split a shared node's cost between its workloads
    load: dict[int, np.ndarray] = {}
    for (k, p), r in x.items():
        w = mi.workloads[k].w
        load.setdefault(p, np.zeros(3))
        load[p] += r * np.array([w.cpu, w.memory_gib, w.gpus])

    rows: list[Assignment] = []
    usable = ~t.dominated
    for k, wd in enumerate(mi.workloads):
        w = wd.w
        masks = masks_by_w[k]
        # cost per replica if the workload ran alone on each pool: whole nodes, no sharing
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.floor(np.minimum(t.vcpus / w.cpu, t.memory_gib / w.memory_gib) + 1e-9)
            if w.gpus > 0:
                fit = np.minimum(fit, np.floor(t.gpus / w.gpus + 1e-9))
            frac = np.where(
                fit >= 1, np.ceil(w.replicas / np.maximum(fit, 1)) * mi.node_cost / w.replicas, np.inf
            )
        all_ok = combine(masks, t.n_pools) & usable
        best_allowed = _cheapest(frac, all_ok)
        binding: list[str] = []
        for i, m in enumerate(masks):
            if m.reason not in _ACTIONABLE:
                continue
            relaxed = combine(masks[:i] + masks[i + 1 :], t.n_pools) & usable
            if _cheapest(frac, relaxed) < best_allowed - 1e-9:
                binding.append(m.label)
        used_sites = {int(t.site_idx[p]) for (kk, p) in x if kk == k}
        if w.min_sites > 1 and len(used_sites) == w.min_sites:
            binding.append(f"spread.min_sites>={w.min_sites} on {w.name}")

        for (kk, p), r in sorted(x.items(), key=lambda kv: t.pools[kv[0][1]].id):
            if kk != k:
                continue
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
            elsewhere = all_ok & (t.site_idx != site)
            next_best = None
            extra = None
            if elsewhere.any():
                j = int(np.argmin(np.where(elsewhere, frac, np.inf)))
                next_best = t.pools[j].id
                extra = round(float(frac[j] - frac[p]) * r, 6)
            latency = {
                name: round(float(rtt[site]), 1)
                for name, rtt in problem.user_rtt.items()
                if np.isfinite(rtt[site])
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
                        cost_breakdown={"compute": round(compute, 6), "storage": round(storage, 6)},
                    ),
                )
            )
    return tuple(rows)
