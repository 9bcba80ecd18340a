"""solve(problem) -> PlacementResult: filters, model, proof, baseline, explanation."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from broker.domain import Baseline, NodeAllocation, PlacementResult
from broker.errors import Infeasible, InvalidRequest
from broker.pooltable import FloatArray
from broker.solver.baseline import Placement, greedy_cheapest_fit, nodes_for
from broker.solver.explain import explain_assignments
from broker.solver.filters import (
    NamedMask,
    combine,
    minimal_conflict,
    rejection_counts,
    site_rejection_counts,
)
from broker.solver.filters import workload_filters as _filters
from broker.solver.model import (
    SPOT,
    ModelInput,
    WorkloadData,
    column_generation,
    initial_pools,
    solve_mip,
)
from broker.solver.problem import GIB_IN_GB, PlacementProblem


def solve(problem: PlacementProblem, *, time_limit_s: float | None = None, seed: int = 0) -> PlacementResult:
    started = time.perf_counter()
    req = problem.request
    limit = time_limit_s if time_limit_s is not None else req.time_limit_s
    _validate(problem)
    t = problem.table
    obj = req.objective
    carbon = np.array([s.carbon_g_per_kwh or 0.0 for s in t.sites])
    node_cost = obj.cost * t.price + obj.carbon * problem.node_power_kw() * carbon[t.site_idx] / 1000.0
    mean_rtt = _mean_user_rtt(problem)

    workloads: list[WorkloadData] = []
    masks_by_w: list[list[NamedMask]] = []
    conflicts: list[str] = []
    rejected: dict[str, dict[str, int]] = {}
    usable = ~t.dominated
    for w in req.workloads:
        masks = _filters(problem, w)
        masks_by_w.append(masks)
        ok = combine(masks, t.n_pools)
        rejected[w.name] = {**rejection_counts(masks, t.n_pools)}
        rejected[w.name].update({f"sites:{k}": v for k, v in site_rejection_counts(masks, t).items()})
        cand = np.flatnonzero(ok & usable)
        if len(cand) == 0:
            conflicts += minimal_conflict(masks, t.n_pools)
        elif w.min_sites > 1:
            spread_label = f"spread.min_sites>={w.min_sites} on {w.name}"
            if w.replicas < w.min_sites:
                conflicts += [spread_label, f"replicas={w.replicas} on {w.name}"]
            elif len(np.unique(t.site_idx[cand])) < w.min_sites:

                def enough_sites(mk: np.ndarray, k: int = w.min_sites) -> bool:
                    return len(np.unique(t.site_idx[mk])) >= k

                conflicts += [spread_label, *minimal_conflict(masks, t.n_pools, ok=enough_sites)]
        if w.max_spot_fraction is not None and len(cand):
            non_spot = cand[t.cap_idx[cand] != SPOT]
            if len(non_spot) == 0 and w.max_spot_fraction * w.replicas < 1:
                conflicts += [f"max_spot_fraction<={w.max_spot_fraction:g} on {w.name}", masks[2].label]
        storage = problem.storage_per_replica_hour(w.storage_gib, w.storage_tier)
        site_cost = obj.cost * storage + obj.latency * mean_rtt / 1000.0
        rep_cost = site_cost[t.site_idx[cand]]
        share = np.maximum(w.cpu / t.vcpus[cand], w.memory_gib / t.memory_gib[cand])
        if w.gpus > 0:
            share = np.maximum(share, w.gpus / t.gpus[cand])
        workloads.append(
            WorkloadData(w=w, cand=cand, frac_cost=node_cost[cand] * share + rep_cost, rep_cost=rep_cost)
        )
    if conflicts:
        raise Infeasible(
            "no placement satisfies every hard constraint",
            conflicts=list(dict.fromkeys(conflicts)),
        )

    mi = ModelInput(
        workloads=workloads,
        node_cost=node_cost,
        price=t.price,
        vcpus=t.vcpus,
        mem=t.memory_gib,
        gpus=t.gpus,
        max_nodes=t.max_nodes,
        site_idx=t.site_idx,
        cap_idx=t.cap_idx,
        egress=problem.egress_matrix(),
        cost_weight=obj.cost,
        name_index={w.name: i for i, w in enumerate(req.workloads)},
        pool_ids=tuple(p.id for p in t.pools),
    )
    baseline = greedy_cheapest_fit(mi)
    pools = initial_pools(mi)
    if baseline:
        pools |= {p for (_, p) in baseline}
    pools, z_lp, min_rc, converged = column_generation(mi, pools)
    remaining = max(0.05, limit - (time.perf_counter() - started))
    status, x, _objective_mip, bound = solve_mip(mi, pools, time_limit_s=remaining, hint=baseline, seed=seed)
    if status == "infeasible" or not x:
        raise Infeasible(
            "no placement satisfies every hard constraint together (owned capacity, spread or spot caps)",
            conflicts=_capacity_conflicts(mi, masks_by_w),
        )

    nodes = nodes_for(mi, x, shared=True)
    compute = sum(n * float(t.price[p]) for p, n in nodes.items())
    storage_cost = _storage_cost(problem, mi, x)
    egress_cost = _egress_cost(mi, x)
    cost = compute + storage_cost + egress_cost
    objective_value = _objective(mi, x, nodes, egress_cost)
    lower = min(bound, z_lp + min_rc) if converged else 0.0
    lower = min(lower, objective_value)
    gap = 0.0 if objective_value <= 0 else max(0.0, (objective_value - lower) / objective_value * 100.0)
    if gap <= 0.01 + 1e-9:
        status = "optimal"
    elif status == "optimal":
        status = "feasible"  # optimal for the pools considered, not proven for the whole catalog

    base_cost = None
    if baseline:
        base_nodes = nodes_for(mi, baseline, shared=False)
        base_cost = (
            sum(n * float(t.price[p]) for p, n in base_nodes.items())
            + _storage_cost(problem, mi, baseline)
            + _egress_cost(mi, baseline)
        )
    savings = None if not base_cost else round((base_cost - cost) / base_cost * 100.0, 2)

    # with cost as the only objective the bound is in USD/h; otherwise it bounds the weighted objective
    cost_only = obj.cost > 0 and obj.latency == 0 and obj.carbon == 0
    lower_per_hour = lower / obj.cost if cost_only else lower
    return PlacementResult(
        status=status,
        objective_value=round(objective_value, 6),
        cost_per_hour=round(cost, 6),
        lower_bound_per_hour=round(lower_per_hour, 6),
        gap_pct=round(gap, 3),
        baseline=Baseline(
            policy="greedy-cheapest-fit", cost_per_hour=None if base_cost is None else round(base_cost, 6)
        ),
        savings_pct=savings,
        solve_ms=int((time.perf_counter() - started) * 1000),
        nodes=tuple(
            NodeAllocation(pool=t.pools[p].id, count=n, cost_per_hour=round(n * float(t.price[p]), 6))
            for p, n in sorted(nodes.items(), key=lambda kv: t.pools[kv[0]].id)
        ),
        assignments=explain_assignments(problem, mi, masks_by_w, x, nodes),
        egress_cost_per_hour=round(egress_cost, 6),
        storage_cost_per_hour=round(storage_cost, 6),
        rejected=rejected,
        warnings=() if converged else ("lower bound not proven: column generation did not converge",),
    )


def _validate(problem: PlacementProblem) -> None:
    req = problem.request
    names = [w.name for w in req.workloads]
    errors: list[dict[str, Any]] = []
    if not names:
        errors.append({"loc": ["body", "workloads"], "msg": "at least one workload is required"})
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            errors.append({"loc": ["body", "workloads", i, "name"], "msg": f"duplicate workload name {n!r}"})
        seen.add(n)
    regions = {u.name for u in req.user_regions}
    for i, w in enumerate(req.workloads):
        for j, dep in enumerate(w.depends_on):
            if dep.workload not in seen or dep.workload == w.name:
                errors.append(
                    {
                        "loc": ["body", "workloads", i, "depends_on", j, "workload"],
                        "msg": f"depends on unknown workload {dep.workload!r}",
                    }
                )
        for region in w.latency_slo_ms:
            if region not in regions:
                errors.append(
                    {
                        "loc": ["body", "workloads", i, "latency_slo_ms", region],
                        "msg": f"user region {region!r} is not declared in user_regions",
                    }
                )
    if errors:
        raise InvalidRequest("the placement request is invalid", errors=errors)


def _mean_user_rtt(problem: PlacementProblem) -> FloatArray:
    if not problem.user_rtt:
        return np.zeros(problem.table.n_sites)
    stacked = np.vstack(list(problem.user_rtt.values()))
    return np.asarray(np.nan_to_num(stacked.mean(axis=0), nan=1000.0), dtype=np.float64)


def _storage_cost(problem: PlacementProblem, mi: ModelInput, x: Placement) -> float:
    total = 0.0
    for (k, p), r in x.items():
        w = mi.workloads[k].w
        if w.storage_gib > 0:
            total += r * float(
                problem.storage_per_replica_hour(w.storage_gib, w.storage_tier)[mi.site_idx[p]]
            )
    return total


def _site_fractions(mi: ModelInput, x: Placement) -> list[dict[int, float]]:
    out: list[dict[int, float]] = [{} for _ in mi.workloads]
    for (k, p), r in x.items():
        s = int(mi.site_idx[p])
        out[k][s] = out[k].get(s, 0.0) + r / mi.workloads[k].w.replicas
    return out


def _egress_cost(mi: ModelInput, x: Placement) -> float:
    """Traffic of w that v's replicas at the same site cannot absorb leaves the site,
    priced at the dearest destination among v's sites (never optimistic)."""
    frac = _site_fractions(mi, x)
    total = 0.0
    for k, wd in enumerate(mi.workloads):
        for dep in wd.w.depends_on:
            kv = mi.name_index[dep.workload]
            for s, f in frac[k].items():
                leaving = f - frac[kv].get(s, 0.0)
                others = [t for t in frac[kv] if t != s]
                if leaving > 1e-12 and others:
                    total += dep.gib_per_hour * GIB_IN_GB * leaving * float(mi.egress[s, others].max())
    return total


def _objective(mi: ModelInput, x: Placement, nodes: dict[int, int], egress_cost: float) -> float:
    value = sum(n * float(mi.node_cost[p]) for p, n in nodes.items())
    for (k, p), r in x.items():
        wd = mi.workloads[k]
        j = int(np.searchsorted(wd.cand, p))
        value += r * float(wd.rep_cost[j])
    return value + mi.cost_weight * egress_cost


def _capacity_conflicts(mi: ModelInput, masks_by_w: list[list[NamedMask]]) -> list[str]:
    """Owned pools that run out, with the constraints that keep workloads off unbounded pools."""
    out: list[str] = []
    bounded_used: set[int] = set()
    for wd, masks in zip(mi.workloads, masks_by_w, strict=True):
        if np.isfinite(mi.max_nodes[wd.cand]).all():
            bounded_used.update(int(p) for p in wd.cand)
            out += minimal_conflict(
                masks, len(mi.price), ok=lambda mk: bool((mk & np.isinf(mi.max_nodes)).any())
            )
        if wd.w.min_sites > 1:
            out.append(f"spread.min_sites>={wd.w.min_sites} on {wd.w.name}")
        if wd.w.max_spot_fraction is not None:
            out.append(f"max_spot_fraction<={wd.w.max_spot_fraction:g} on {wd.w.name}")
    out += [f"capacity:{mi.pool_ids[p]} max_nodes={int(mi.max_nodes[p])}" for p in sorted(bounded_used)]
    return list(dict.fromkeys(out)) or ["capacity"]
