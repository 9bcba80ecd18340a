"""solve(problem) -> PlacementResult, the solver's pipeline from request to answer.

validate -> prepare (filters, candidates: prepare/) -> search input (classes, model input, the
baselines' placements as starts) -> search (search/, or search/split.py for enterprise-sized
requests) -> answer (replicas dealt back to workloads, costs, bound, explanations: answer/).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from broker.core.domain import Baseline, NodeAllocation, PlacementResult, StopReason
from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.errors import Infeasible, InvalidRequest
from broker.solver.answer.disaggregate import disaggregate
from broker.solver.answer.explain import explain_assignments
from broker.solver.answer.nodes import node_assignments, packing_report, packing_warnings
from broker.solver.answer.packing import Capacities, pack_placement
from broker.solver.baselines.compare import ANYWHERE, baselines
from broker.solver.baselines.greedy import greedy_cheapest_fit
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.costs import egress_cost, placement_nodes, storage_cost
from broker.solver.model.layout import ModelInput
from broker.solver.model.patterns import PatternNodes
from broker.solver.options import SolverOptions
from broker.solver.prepare.candidates import Prepared, prepare
from broker.solver.prepare.classes import SPOT, WorkloadClass, WorkloadData, build_classes
from broker.solver.prepare.filters import NamedMask, minimal_conflict
from broker.solver.prepare.lattice import common_step, round_down
from broker.solver.problem import PlacementProblem
from broker.solver.search import SearchResult, search
from broker.solver.search.split import applies, search_in_groups
from broker.solver.types import ClassPlacement, Placement

# the time limit of a request that sets none, when the caller gives none either (library use;
# the service always gives one: broker/placements/time_budget.py)
DEFAULT_TIME_LIMIT_S = 10.0
OPTIMAL_GAP_PCT = 0.01  # a gap this small is reported as proven optimal


@dataclass
class SearchInput:
    """What the search reads, built from a prepared request: the workloads merged into classes,
    the model's input, and the start placements (the baselines' answers, by class)."""

    classes: list[WorkloadClass]
    class_of: IntArray  # per workload: its class
    mi: ModelInput
    starts: list[ClassPlacement]
    usable_now: list[tuple[int, int, int]]  # running replicas on pools still offered: (workload, pool, replicas)
    current_total: float  # replicas running now, including those whose pool is gone
    # the answer's baselines, headline first (baselines/compare.py): priced before the search, so
    # their time is taken from the search's share of the limit
    baselines: tuple[Baseline, ...]


def solve(
    problem: PlacementProblem,
    *,
    time_limit_s: float | None = None,
    seed: int = 0,
    options: SolverOptions | None = None,
) -> PlacementResult:
    """The cheapest placement of `problem` found within the time limit (the request's unless
    given), with a lower bound for the whole catalog. `options`: the solver's knobs and where
    big MIPs run (default: SolverOptions(), every MIP in this process)."""
    started = time.perf_counter()
    opts = options if options is not None else SolverOptions()
    limit = time_limit_s if time_limit_s is not None else problem.request.time_limit_s
    limit = DEFAULT_TIME_LIMIT_S if limit is None else limit
    _validate(problem)
    prep = prepare(problem)
    if prep.conflicts:
        raise Infeasible(
            "no placement satisfies every hard constraint",
            conflicts=list(dict.fromkeys(prep.conflicts)),
            stop_reason=StopReason.INFEASIBLE.value,
        )
    si = search_input(problem, prep, opts)
    # what comes after the search (dealing replicas back, costs, explanations) is part of the
    # request's time too
    packing_s = min(opts.packing_max_s, opts.packing_share * limit)
    consolidate_s = min(opts.consolidate_max_s, opts.consolidate_share * limit)
    explain_s = (opts.explain_s_per_workload + opts.packing_s_per_workload) * len(prep.workloads)
    after = opts.after_search_s + packing_s + consolidate_s + explain_s
    remaining = max(0.1, limit - (time.perf_counter() - started) - after)
    run = search_in_groups if applies(si.mi, opts) else search
    search_started = time.perf_counter()
    found = run(si.mi, starts=si.starts, time_limit_s=remaining, seed=seed, options=opts)
    if found is None:
        raise Infeasible(
            "no placement satisfies every hard constraint together (owned capacity, spread or spot caps)",
            conflicts=_capacity_conflicts(problem, prep.workloads, prep.masks_by_w),
            stop_reason=StopReason.INFEASIBLE.value,
        )
    unused = 0.0 if found.out_of_time else max(0.0, remaining - (time.perf_counter() - search_started)) / remaining
    left = max(0.0, limit - (time.perf_counter() - started) - explain_s)
    if opts.work_limits is None:
        packing_s = min(packing_s, left)
        consolidate_s = min(consolidate_s, left - packing_s)
    else:  # packing and consolidation end by their work: the rest of the time only guards
        packing_s = consolidate_s = left
    return _answer(
        problem,
        prep,
        si,
        found,
        started,
        packing_s=packing_s,
        consolidate_s=consolidate_s,
        seed=seed,
        options=opts,
        time_limit_s=limit,
        unused_share=unused,
    )


def stop_reason(gap_pct: float, *, rel_gap: float, unused_share: float, stall_unused_share: float) -> StopReason:
    """Why a search that found a placement stopped: its gap proven (optimal, or the target), else
    its time ran out, or it stalled (returned with much of its time unused, nothing left to try)."""
    if gap_pct <= OPTIMAL_GAP_PCT + 1e-9:
        return StopReason.OPTIMAL
    if gap_pct <= rel_gap * 100.0 + 1e-9:
        return StopReason.GAP_TARGET
    return StopReason.STALL if unused_share >= stall_unused_share else StopReason.TIME_LIMIT


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def search_input(problem: PlacementProblem, prep: Prepared, opts: SolverOptions) -> SearchInput:
    """Classes, the model's input and the start placements of a prepared request."""
    req, t, obj = problem.request, problem.table, problem.request.objective
    workloads = prep.workloads
    name_index = {w.name: i for i, w in enumerate(req.workloads)}
    current = _current(problem, workloads, name_index)
    # what replicas of this request can fill of each node: exact for packing, tighter for the model
    vcpus = round_down(t.vcpus, common_step(wd.w.cpu for wd in workloads))
    mem = round_down(t.memory_gib, common_step(wd.w.memory_gib for wd in workloads))
    classes, _of = build_classes(
        workloads,
        vcpus=vcpus,
        mem=mem,
        gpus=t.gpus,
        name_index=name_index,
        pinned={k for k, _, _ in current},
    )
    current_total = float(sum(r for k, _, r in current))
    # one pass over the candidates per entry (a set of them per entry cost a replan ~0.2 s)
    usable_now = [(k, p, r) for k, p, r in current if p >= 0 and bool((workloads[k].cand == p).any())]
    mi = ModelInput(
        classes=classes,
        node_cost=prep.node_cost,
        price=t.price,
        vcpus=vcpus,
        mem=mem,
        gpus=t.gpus,
        max_nodes=t.max_nodes,
        site_idx=t.site_idx,
        cap_idx=t.cap_idx,
        arch_idx=t.arch_idx,
        egress=problem.egress_matrix(),
        site_provider=np.unique(t.site_provider, return_inverse=True)[1].astype(np.int64),
        cost_weight=obj.cost,
        n_sites=t.n_sites,
        pool_ids=(),
        keep_class=np.array([int(_of[k]) for k, _, _ in usable_now], dtype=np.int64),
        keep_pool=np.array([p for _, p, _ in usable_now], dtype=np.int64),
        keep_cur=np.array([float(r) for _, _, r in usable_now]),
        move_cost=obj.cost * req.migration_cost_per_replica / req.horizon_hours,
        current_total=current_total,
        max_moves=req.max_moves,
        large_replica_rows=opts.large_replica_rows,
        pattern_nodes=PatternNodes() if len(classes) <= opts.pattern_nodes_max_classes else None,
        **_quota_arrays(problem),
    )
    arrays = PoolArrays(prep.node_cost, vcpus, mem, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)
    baseline = greedy_cheapest_fit(workloads, arrays)
    starts: list[ClassPlacement] = []
    in_force = _in_force(workloads, usable_now, baseline or {}, spot=t.cap_idx == SPOT)
    if in_force is not None:
        # a re-plan starts from the placement in force: with unchanged inputs nothing beats it,
        # and a neighbourhood that moves replicas must pay for the moves
        starts.append(_to_classes(in_force, _of))
    if baseline:
        starts.append(_to_classes(baseline, _of))
    k8s = None
    if len(workloads) <= opts.k8s_start_max_workloads:
        # the scheduler-style answer shares nodes: a strong start when the LP cannot finish in time
        k8s = kubernetes_filter_score(workloads, arrays)
        if k8s is not None:
            starts.append(_to_classes(k8s[0], _of))
    if opts.price_baselines:
        priced = baselines(problem, prep, baseline or None, k8s, current)
    else:
        priced = (Baseline(ANYWHERE, None, "not computed (SolverOptions.price_baselines off)"),)
    return SearchInput(classes, _of, mi, starts, usable_now, current_total, priced)


def _answer(
    problem: PlacementProblem,
    prep: Prepared,
    si: SearchInput,
    found: SearchResult,
    started: float,
    *,
    packing_s: float,
    consolidate_s: float,
    seed: int,
    options: SolverOptions,
    time_limit_s: float,
    unused_share: float,
) -> PlacementResult:
    """The class placement dealt back to the workloads, packed onto nodes and consolidated, its
    costs, its bound and explanations; why the search stopped (`unused_share`: the share of its time the
    search left unused)."""
    t, obj = problem.table, problem.request.objective
    workloads, masks_by_w, node_cost = prep.workloads, prep.masks_by_w, prep.node_cost
    classes, mi = si.classes, si.mi
    current_total = si.current_total
    site_of = t.site_idx.tolist()
    cap_of = t.cap_idx.tolist()
    aggregate_x = disaggregate(classes, workloads, found.x, site_of=site_of, cap_of=cap_of)
    # packed against the same per-node capacities the model's aggregate rule uses
    caps = Capacities(
        mi.vcpus, mi.mem, mi.gpus, t.max_nodes, site_of, cap_of, node_cost, mi.quota_of_pool, mi.quota_node_vcpus,
        mi.quota_vcpus,
    )  # fmt: skip
    packed = pack_placement(
        workloads,
        aggregate_x,
        caps,
        time_s=packing_s,
        max_vars=options.packing_max_vars,
        seed=seed,
        consolidate_s=consolidate_s,
        pinned=frozenset(k for k, _, _ in si.usable_now),
        per_pool_s=None if options.work_limits is None else options.work_limits.packing_s,
    )
    aggregate_nodes = placement_nodes(workloads, aggregate_x, vcpus=mi.vcpus, mem=mi.mem, gpus=mi.gpus)
    before = _priced(problem, si, prep, aggregate_x, aggregate_nodes)
    x, nodes = packed.x, packed.counts
    after = _priced(problem, si, prep, x, nodes, like=None if packed.stats.moved else before)
    storage_total, egress_total, cost = after.storage, after.egress, after.cost
    objective_value, still = after.objective, after.still
    # exact packing only adds to what the aggregate model allows: its bound still holds
    lower = min(found.lower_bound, objective_value)
    gap = _gap(objective_value, lower)
    status = "optimal" if gap <= OPTIMAL_GAP_PCT + 1e-9 else "feasible"
    why = stop_reason(
        gap, rel_gap=options.rel_gap, unused_share=unused_share, stall_unused_share=options.stall_unused_share
    )

    headline = si.baselines[0]
    # with cost as the only objective the bound is in USD/h; otherwise it bounds the weighted objective
    cost_only = obj.cost > 0 and obj.latency == 0 and obj.carbon == 0
    lower_per_hour = lower / obj.cost if cost_only else lower
    warnings: list[str] = []
    if current_total:  # something runs now: say how much of it moves
        warnings.append(f"moves: {int(current_total - still)} of {int(current_total)} running replicas change pool")
    if not found.proven:
        warnings.append(
            "weak lower bound: column generation did not converge within the time limit, "
            "the bound is a Lagrangian one or each replica's cheapest share of a node's cost"
        )
    warnings += packing_warnings(packed.stats, before.cost, cost)
    if options.work_limits is not None and (found.out_of_time or time.perf_counter() - started > time_limit_s):
        warnings.append(
            "work limits: the time limit cut the search short, so this answer depends on the machine's speed and load"
        )
    return PlacementResult(
        status=status,
        objective_value=round(objective_value, 6),
        cost_per_hour=round(cost, 6),
        lower_bound_per_hour=round(lower_per_hour, 6),
        gap_pct=round(gap, 3),
        baseline=headline,
        savings_pct=headline.savings_pct(cost),
        solve_ms=_ms_since(started),
        nodes=tuple(
            NodeAllocation(pool=t.pools[p].id, count=n, cost_per_hour=round(n * float(t.price[p]), 6))
            for p, n in sorted(nodes.items(), key=lambda kv: t.pools[kv[0]].id)
        ),
        assignments=explain_assignments(problem, workloads, masks_by_w, x, nodes, node_cost=node_cost),
        egress_cost_per_hour=round(egress_total, 6),
        storage_cost_per_hour=round(storage_total, 6),
        rejected=prep.rejected,
        warnings=tuple(warnings),
        node_assignments=node_assignments(t, workloads, packed.nodes),
        packing=packing_report(
            packed.stats,
            aggregate_nodes=sum(aggregate_nodes.values()),
            aggregate_cost=before.cost,
            aggregate_gap=before.gap(found.lower_bound),
        ),
        stop_reason=why.value,
        time_limit_s=round(time_limit_s, 3),
        bound_kind=found.bound_kind,
        baselines=si.baselines,
    )


@dataclass(frozen=True)
class _Priced:
    """A per-workload placement on a number of nodes per pool: what it costs and its objective."""

    cost: float
    storage: float
    egress: float
    objective: float
    still: int  # running replicas it keeps where they are

    def gap(self, lower: float) -> float:
        return _gap(self.objective, min(lower, self.objective))


def _priced(
    problem: PlacementProblem,
    si: SearchInput,
    prep: Prepared,
    x: Placement,
    nodes: dict[int, int],
    *,
    like: _Priced | None = None,
) -> _Priced:
    """Costs and objective of (x, nodes); storage and egress taken from `like` (the same x)."""
    t, obj = problem.table, problem.request.objective
    workloads = prep.workloads
    if like is not None:
        storage, egress = like.storage, like.egress
    else:
        name_index = {w.name: i for i, w in enumerate(problem.request.workloads)}
        storage = storage_cost(problem, workloads, x)
        egress = egress_cost(problem, workloads, x, name_index)
    compute = sum(n * float(t.price[p]) for p, n in nodes.items())
    still = sum(min(x.get((k, p), 0), r) for k, p, r in si.usable_now)
    objective = _objective(workloads, x, nodes, prep.node_cost, obj.cost * egress)
    objective += si.mi.move_cost * (si.current_total - still)
    return _Priced(compute + storage + egress, storage, egress, objective, int(still))


def _gap(objective: float, lower: float) -> float:
    return 0.0 if objective <= 0 else max(0.0, (objective - lower) / objective * 100.0)


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
            # a dependency is traffic to another workload, charged as egress between their sites:
            # cycles (traffic both ways) are fine, a workload's own traffic is not a dependency
            if dep.workload == w.name:
                msg = f"{w.name!r} depends on itself: depends_on names another workload of the request"
            elif dep.workload not in seen:
                msg = f"depends on unknown workload {dep.workload!r}"
            else:
                continue
            errors.append({"loc": ["body", "workloads", i, "depends_on", j, "workload"], "msg": msg})
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


def _current(
    problem: PlacementProblem, workloads: list[WorkloadData], name_index: dict[str, int]
) -> list[tuple[int, int, int]]:
    """(workload index, pool index or -1 when the pool is gone, replicas) running now, from the
    request and from the problem (a re-plan), summed per pair."""
    t = problem.table
    rows: dict[tuple[int, int], int] = {}
    pairs = [(w, pool, r) for w, pool, r in problem.request.current]
    pairs += [(w, pool, r) for pool, per in problem.current.items() for w, r in per.items()]
    for w, pool, r in pairs:
        if w not in name_index or r <= 0:
            continue
        key = (name_index[w], t.pool_index.get(pool, -1))
        rows[key] = rows.get(key, 0) + int(r)
    return [(k, p, r) for (k, p), r in rows.items()]


def _quota_arrays(problem: PlacementProblem) -> dict[str, Any]:
    """ModelInput's quota fields: the positive family quotas (a quota of 0 is a filter) as rows."""
    t = problem.table
    groups = sorted(g for g, q in problem.family_quotas.items() if 0 < q < math.inf)
    if not groups:
        return {}
    index = {g: i for i, g in enumerate(groups)}
    of_pool = np.array([index.get(str(g), -1) for g in t.quota_group], dtype=np.int64)
    return {
        "quota_of_pool": of_pool,
        "quota_node_vcpus": np.asarray(t.raw_vcpus, dtype=np.float64),
        "quota_vcpus": np.array([float(problem.family_quotas[g]) for g in groups]),
    }


def _in_force(
    workloads: list[WorkloadData], usable_now: list[tuple[int, int, int]], fallback: Placement, *, spot: BoolArray
) -> Placement | None:
    """The placement running now, brought to the request's replicas: a workload's replicas beyond
    the request leave the pools where most of them run, its extra replicas join those where
    fewest run (on-demand first, so spreads and spot caps hold where they can), and a workload
    whose pools are all gone takes its place in `fallback` (the greedy start). None unless most
    workloads (at least half) run on pools the request may still use: a re-plan, not a request
    that names a few replicas running now. The search drops it if it breaks a rule."""
    if 2 * len({k for k, _, _ in usable_now}) < max(len(workloads), 1):
        return None
    now: dict[int, dict[int, int]] = {}
    for k, p, r in usable_now:
        now.setdefault(k, {})[p] = now.get(k, {}).get(p, 0) + r
    out: Placement = {}
    for k, wd in enumerate(workloads):
        pools = now.get(k)
        if not pools:
            mine = {key: r for key, r in fallback.items() if key[0] == k}
            if not mine:
                return None
            out.update(mine)
            continue
        extra = wd.w.replicas - sum(pools.values())
        for _ in range(abs(extra)):
            if extra < 0:
                p = max(pools, key=lambda q: (pools[q], q))
                pools[p] -= 1
            else:
                p = min(pools, key=lambda q: (bool(spot[q]), pools[q], q))
                pools[p] += 1
        out.update({(k, p): r for p, r in pools.items() if r > 0})
    return out


def _to_classes(x: Placement, class_of: Any) -> ClassPlacement:
    out: ClassPlacement = {}
    for (k, p), r in x.items():
        key = (int(class_of[k]), p)
        out[key] = out.get(key, 0) + r
    return out


def _objective(
    workloads: list[WorkloadData], x: Placement, nodes: dict[int, int], node_cost: FloatArray, egress: float
) -> float:
    value = sum(n * float(node_cost[p]) for p, n in nodes.items())
    for (k, p), r in x.items():
        wd = workloads[k]
        value += r * float(wd.rep_cost[int(np.searchsorted(wd.cand, p))])
    return value + egress


def _capacity_conflicts(
    problem: PlacementProblem, workloads: list[WorkloadData], masks_by_w: list[list[NamedMask]]
) -> list[str]:
    """Owned pools that run out, with the constraints that keep workloads off unbounded pools."""
    t = problem.table
    out: list[str] = []
    bounded_used: set[int] = set()
    for wd, masks in zip(workloads, masks_by_w, strict=True):
        if np.isfinite(t.max_nodes[wd.cand]).all():
            bounded_used.update(int(p) for p in wd.cand)
            out += minimal_conflict(masks, t.n_pools, ok=lambda mk: bool((mk & np.isinf(t.max_nodes)).any()))
        if wd.w.min_sites > 1:
            out.append(f"spread.min_sites>={wd.w.min_sites} on {wd.w.name}")
        if wd.w.max_spot_fraction is not None:
            out.append(f"max_spot_fraction<={wd.w.max_spot_fraction:g} on {wd.w.name}")
    out += [f"capacity:{t.pools[p].id} max_nodes={int(t.max_nodes[p])}" for p in sorted(bounded_used)]
    return list(dict.fromkeys(out)) or ["capacity"]
