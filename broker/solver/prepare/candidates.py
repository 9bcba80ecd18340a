"""Per-request preparation shared by the solver and the baselines: costs, filters, candidates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from broker.core.domain import Workload
from broker.core.pooltable import BoolArray, FloatArray
from broker.solver.prepare.classes import SPOT, WorkloadData
from broker.solver.prepare.filters import NamedMask, combine, minimal_conflict, rejection_counts, site_rejection_counts
from broker.solver.prepare.filters import workload_filters as _filters
from broker.solver.problem import PlacementProblem


@dataclass
class Prepared:
    workloads: list[WorkloadData]
    masks_by_w: list[list[NamedMask]]
    rejected: dict[str, dict[str, int]]
    conflicts: list[str]
    node_cost: FloatArray  # objective cost per node (cost, carbon weights)
    name_index: dict[str, int]


def filter_signature(w: Workload) -> tuple[object, ...]:
    """Everything the candidate filters read: equal signatures, equal candidate sets."""
    return (
        w.cpu,
        w.memory_gib,
        w.gpus,
        w.gpu_model,
        w.arch,
        w.capacity_types,
        w.max_spot_fraction is not None and w.max_spot_fraction <= 0,
        w.providers,
        w.residency,
        tuple(sorted(w.latency_slo_ms.items())),
        tuple((r.attribute, r.operator, r.texts, r.numbers) for r in w.requirements),
        w.burstable,
    )


def prepare(problem: PlacementProblem) -> Prepared:
    """Filters run once per distinct signature: an enterprise estate of thousands of workloads
    shares a few hundred."""
    req = problem.request
    t = problem.table
    obj = req.objective
    carbon = np.array([s.carbon_g_per_kwh or 0.0 for s in t.sites])
    node_cost = obj.cost * t.price + obj.carbon * problem.node_power_kw() * carbon[t.site_idx] / 1000.0
    mean_rtt = _mean_user_rtt(problem)
    usable = ~t.dominated
    by_sig: dict[tuple[object, ...], tuple[list[NamedMask], Any, dict[str, int]]] = {}
    site_cost_memo: dict[tuple[object, ...], FloatArray] = {}
    workloads: list[WorkloadData] = []
    masks_by_w: list[list[NamedMask]] = []
    conflicts: list[str] = []
    rejected: dict[str, dict[str, int]] = {}
    mask_cache: dict[tuple[object, ...], BoolArray] = {}
    for w in req.workloads:
        sig = filter_signature(w)
        if sig not in by_sig:
            masks = _filters(problem, w, mask_cache)
            ok: BoolArray = combine(masks, t.n_pools)
            counts = {**rejection_counts(masks, t.n_pools)}
            if t.pruned:  # never considered: a same-site pool is at least as large and no dearer
                counts["dominated"] = t.pruned
            counts.update({f"sites:{k}": v for k, v in site_rejection_counts(masks, t).items()})
            # a dominated pool may be the only one a requirement or a family quota allows
            # (Catalog.table_for): then only pools another allowed pool dominates are left out
            rerank = bool(w.requirements) or bool(problem.family_quotas)
            by_sig[sig] = (
                masks,
                np.flatnonzero(ok & ~t.dominated_within(ok) if rerank else ok & usable),
                counts,
            )
        masks, cand, counts = by_sig[sig]
        masks_by_w.append(masks)
        rejected[w.name] = dict(counts)
        conflicts += _conflicts(problem, w, masks, cand)
        skey = (sig, w.storage_gib, w.storage_tier)
        if skey not in site_cost_memo:
            storage = problem.storage_per_replica_hour(w.storage_gib, w.storage_tier)
            site_cost = obj.cost * storage + obj.latency * mean_rtt / 1000.0
            site_cost_memo[skey] = site_cost[t.site_idx[cand]]
        workloads.append(WorkloadData(w=w, cand=cand, rep_cost=site_cost_memo[skey], signature=sig))
    return Prepared(
        workloads=workloads,
        masks_by_w=masks_by_w,
        rejected=rejected,
        conflicts=conflicts,
        node_cost=node_cost,
        name_index={w.name: i for i, w in enumerate(req.workloads)},
    )


def _conflicts(problem: PlacementProblem, w: Workload, masks: list[NamedMask], cand: Any) -> list[str]:
    t = problem.table
    out: list[str] = []
    if len(cand) == 0:
        out += minimal_conflict(masks, t.n_pools)
    elif w.min_sites > 1:
        spread_label = f"spread.min_sites>={w.min_sites} on {w.name}"
        if w.replicas < w.min_sites:
            out += [spread_label, f"replicas={w.replicas} on {w.name}"]
        elif len(np.unique(t.site_idx[cand])) < w.min_sites:

            def enough_sites(mk: np.ndarray, k: int = w.min_sites) -> bool:
                rerank = w.requirements or problem.family_quotas
                return len(np.unique(t.site_idx[mk if rerank else mk & ~t.dominated])) >= k

            out += [spread_label, *minimal_conflict(masks, t.n_pools, ok=enough_sites)]
    if w.max_spot_fraction is not None and len(cand):
        non_spot = cand[t.cap_idx[cand] != SPOT]
        if len(non_spot) == 0 and w.max_spot_fraction * w.replicas < 1:
            out += [f"max_spot_fraction<={w.max_spot_fraction:g} on {w.name}", masks[2].label]
    return out


def _mean_user_rtt(problem: PlacementProblem) -> FloatArray:
    if not problem.user_rtt:
        return np.zeros(problem.table.n_sites)
    stacked = np.vstack(list(problem.user_rtt.values()))
    return np.asarray(np.nan_to_num(stacked.mean(axis=0), nan=1000.0), dtype=np.float64)
