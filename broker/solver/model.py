"""MIP model of a placement and its proof of quality.

Variables: nodes per pool n_p (integer, <= max_nodes), replicas of workload w
on pool p x_wp (integer), site-used flags y_ws for spread, and egress
fractions e_ks for dependencies. Capacity is aggregated per pool (the contract's
rule: replicas * cpu <= count * vcpus, same for memory and GPUs) and every
replica fits one node (filters).

The model is solved over a restricted set of pools. Its lower bound is made
valid for the full catalog by column generation on the packing LP
relaxation plus reduced-cost reasoning:
  LB = min(B_restricted, z_LP + min_{p excluded} rc_p)
where B_restricted is HiGHS' dual bound on the restricted MIP, z_LP the LP
optimum over all pools (column generation converged), and rc_p >= 0 a lower
bound on the reduced cost of opening one node of an excluded pool. Any
solution using an excluded pool costs at least z_LP + rc_p; any other one at
least B_restricted.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field

import numpy as np
from ortools.math_opt.python import mathopt

from broker.domain import CapacityType, Workload
from broker.pooltable import CAPACITY_TYPES, BoolArray, FloatArray, IntArray
from broker.solver.problem import GIB_IN_GB

SPOT = CAPACITY_TYPES.index(CapacityType.SPOT)
EPS = 1e-7


@dataclass
class WorkloadData:
    w: Workload
    cand: IntArray  # candidate pool indices (filtered, non-dominated)
    frac_cost: FloatArray  # objective cost of one replica on each candidate if nodes were divisible
    rep_cost: FloatArray  # per-replica site cost (storage, latency term) on each candidate


@dataclass
class ModelInput:
    workloads: list[WorkloadData]
    node_cost: FloatArray  # objective cost per node, all pools
    price: FloatArray
    vcpus: FloatArray
    mem: FloatArray
    gpus: FloatArray
    max_nodes: FloatArray
    site_idx: IntArray
    cap_idx: IntArray
    egress: FloatArray  # [site, site] USD/GB
    cost_weight: float
    name_index: dict[str, int] = field(default_factory=dict)
    pool_ids: tuple[str, ...] = ()


@dataclass
class ModelSolution:
    status: str  # optimal | feasible | infeasible | unknown
    x: dict[tuple[int, int], int]  # (workload index, pool index) -> replicas
    objective: float
    restricted_bound: float
    lp_bound: float
    excluded_min_rc: float
    lp_converged: bool
    pools_considered: int

    @property
    def lower_bound(self) -> float:
        if not self.lp_converged:
            return 0.0  # nothing provable about pools never priced
        return min(self.restricted_bound, self.lp_bound + self.excluded_min_rc)


def _demand(wd: WorkloadData) -> FloatArray:
    w = wd.w
    return np.array([w.cpu, w.memory_gib, w.gpus], dtype=np.float64)


def initial_pools(mi: ModelInput, *, sites_extra: int = 3, per_site: int = 3) -> set[int]:
    """A small starting set: each workload's cheapest sites, a few cheapest pools there."""
    chosen: set[int] = set()
    for wd in mi.workloads:
        if len(wd.cand) == 0:
            continue
        sites = mi.site_idx[wd.cand]
        order = np.argsort(wd.frac_cost, kind="stable")
        best_sites: list[int] = []
        for i in order:
            s = int(sites[i])
            if s not in best_sites:
                best_sites.append(s)
                if len(best_sites) >= wd.w.min_sites + sites_extra:
                    break
        for s in best_sites:
            at = np.flatnonzero(sites == s)
            by_frac = at[np.argsort(wd.frac_cost[at], kind="stable")[:per_site]]
            chosen.update(int(p) for p in wd.cand[by_frac])
            per_cpu = mi.node_cost[wd.cand[at]] / mi.vcpus[wd.cand[at]]
            per_mem = mi.node_cost[wd.cand[at]] / mi.mem[wd.cand[at]]
            chosen.add(int(wd.cand[at[int(np.argmin(per_cpu))]]))
            chosen.add(int(wd.cand[at[int(np.argmin(per_mem))]]))
    return chosen


def _packing_lp(mi: ModelInput, pools: list[int]) -> tuple[float, FloatArray]:
    """LP relaxation of pure packing over `pools`: (optimum, demand duals u_w)."""
    m = mathopt.Model(name="packing-lp")
    pool_set = set(pools)
    n = {p: m.add_variable(lb=0.0, ub=float(mi.max_nodes[p])) for p in pools}
    load: dict[int, list[tuple[mathopt.Variable, FloatArray]]] = {p: [] for p in pools}
    demand_rows = []
    obj_terms = [mi.node_cost[p] * n[p] for p in pools]
    for wd in mi.workloads:
        xs = []
        d = _demand(wd)
        for j, p in enumerate(wd.cand):
            p = int(p)
            if p not in pool_set:
                continue
            x = m.add_variable(lb=0.0)
            xs.append(x)
            load[p].append((x, d))
            if wd.rep_cost[j]:
                obj_terms.append(float(wd.rep_cost[j]) * x)
        demand_rows.append(m.add_linear_constraint(mathopt.fast_sum(xs) == wd.w.replicas))
    for p in pools:
        if not load[p]:
            continue
        caps = (mi.vcpus[p], mi.mem[p], mi.gpus[p])
        for r in range(3):
            terms = [float(d[r]) * x for x, d in load[p] if d[r] > 0]
            if terms:
                m.add_linear_constraint(mathopt.fast_sum(terms) - float(caps[r]) * n[p] <= 0)
    m.minimize(mathopt.fast_sum(obj_terms))
    res = mathopt.solve(m, mathopt.SolverType.HIGHS)
    if res.termination.reason != mathopt.TerminationReason.OPTIMAL:
        return math.inf, np.zeros(len(mi.workloads))
    duals = np.array(res.dual_values(demand_rows), dtype=np.float64)
    return float(res.objective_value()), duals


def _price_out(mi: ModelInput, duals: FloatArray, in_model: BoolArray) -> tuple[FloatArray, IntArray]:
    """Lower bounds on the per-node reduced cost of every candidate pool not in the model.

    For pool p, the best a node can earn is max sum_w g_w x_w with
    sum_w d_wr x_w <= cap_pr (g_w = u_w - rep_cost_wp > 0). Dropping all but one
    resource r gives an upper bound cap_pr * max_w g_w / d_wr; the smallest over
    cpu and memory is still an upper bound, so rc_p >= node_cost_p - UB_p.
    """
    n_pools = len(mi.price)
    best_cpu = np.zeros(n_pools)
    best_mem = np.zeros(n_pools)
    touched = np.zeros(n_pools, dtype=bool)
    for k, wd in enumerate(mi.workloads):
        g = duals[k] - wd.rep_cost
        np.maximum.at(best_cpu, wd.cand, np.maximum(g, 0) / wd.w.cpu)
        np.maximum.at(best_mem, wd.cand, np.maximum(g, 0) / wd.w.memory_gib)
        touched[wd.cand] = True
    ub = np.minimum(best_cpu * mi.vcpus, best_mem * mi.mem)
    rc = mi.node_cost - ub
    idx = np.flatnonzero(touched & ~in_model)
    return rc[idx], idx


def column_generation(
    mi: ModelInput, pools: set[int], *, max_rounds: int = 30, add_per_round: int = 300
) -> tuple[set[int], float, float, bool]:
    """Grow `pools` until no excluded pool can lower the packing LP; returns (pools, z_LP, min rc, ok)."""
    in_model = np.zeros(len(mi.price), dtype=bool)
    for _ in range(max_rounds):
        in_model[:] = False
        in_model[list(pools)] = True
        z, duals = _packing_lp(mi, sorted(pools))
        if not math.isfinite(z):
            return pools, 0.0, 0.0, False
        rc, idx = _price_out(mi, duals, in_model)
        neg = rc < -1e-9 * max(1.0, abs(z))
        if not neg.any():
            return pools, z, float(rc.min()) if len(rc) else math.inf, True
        order = np.argsort(rc[neg])[:add_per_round]
        pools |= {int(p) for p in idx[neg][order]}
    return pools, 0.0, 0.0, False


def solve_mip(
    mi: ModelInput,
    pools: set[int],
    *,
    time_limit_s: float,
    hint: dict[tuple[int, int], int] | None = None,
    seed: int = 0,
) -> tuple[str, dict[tuple[int, int], int], float, float]:
    """Solve the full model over `pools`: (status, x, objective, dual bound)."""
    m = mathopt.Model(name="placement")
    pool_list = sorted(pools)
    pool_set = set(pool_list)
    n = {p: m.add_integer_variable(lb=0.0, ub=float(mi.max_nodes[p])) for p in pool_list}
    x: dict[tuple[int, int], mathopt.Variable] = {}
    load: dict[int, list[tuple[mathopt.Variable, FloatArray]]] = {p: [] for p in pool_list}
    obj_terms: list[mathopt.LinearExpression] = [mi.node_cost[p] * n[p] for p in pool_list]
    site_share: list[dict[int, list[mathopt.Variable]]] = []
    for k, wd in enumerate(mi.workloads):
        d = _demand(wd)
        per_site: dict[int, list[mathopt.Variable]] = {}
        spot_terms = []
        for j, p in enumerate(wd.cand):
            p = int(p)
            if p not in pool_set:
                continue
            v = m.add_integer_variable(lb=0.0, ub=float(wd.w.replicas))
            x[(k, p)] = v
            load[p].append((v, d))
            per_site.setdefault(int(mi.site_idx[p]), []).append(v)
            if wd.rep_cost[j]:
                obj_terms.append(float(wd.rep_cost[j]) * v)
            if mi.cap_idx[p] == SPOT:
                spot_terms.append(v)
        m.add_linear_constraint(mathopt.fast_sum(per_site_vars(per_site)) == wd.w.replicas)
        if wd.w.max_spot_fraction is not None and spot_terms:
            m.add_linear_constraint(
                mathopt.fast_sum(spot_terms) <= math.floor(wd.w.max_spot_fraction * wd.w.replicas + 1e-9)
            )
        if wd.w.min_sites > 1:
            ys = []
            for _s, vs in per_site.items():
                y = m.add_binary_variable()
                ys.append(y)
                total = mathopt.fast_sum(vs)
                m.add_linear_constraint(total <= wd.w.replicas * y)
                m.add_linear_constraint(total >= y)
            m.add_linear_constraint(mathopt.fast_sum(ys) >= wd.w.min_sites)
        site_share.append(per_site)
    for p in pool_list:
        caps = (mi.vcpus[p], mi.mem[p], mi.gpus[p])
        for r in range(3):
            terms = [float(d[r]) * v for v, d in load[p] if d[r] > 0]
            if terms:
                m.add_linear_constraint(mathopt.fast_sum(terms) - float(caps[r]) * n[p] <= 0)
    # egress: traffic of w that cannot be served by v's replicas at the same site leaves it
    for k, wd in enumerate(mi.workloads):
        for dep in wd.w.depends_on:
            kv = mi.name_index[dep.workload]
            mine, theirs = site_share[k], site_share[kv]
            dest_sites = list(theirs)
            for s, vs in mine.items():
                others = [t for t in dest_sites if t != s]
                if not others:
                    continue
                price_out = float(mi.egress[s, others].max())
                if price_out <= 0:
                    continue
                e = m.add_variable(lb=0.0)
                frac_mine = mathopt.fast_sum(vs) * (1.0 / wd.w.replicas)
                frac_theirs = (
                    mathopt.fast_sum(theirs[s]) * (1.0 / mi.workloads[kv].w.replicas)
                    if s in theirs
                    else mathopt.LinearExpression()
                )
                m.add_linear_constraint(e >= frac_mine - frac_theirs)
                obj_terms.append(mi.cost_weight * dep.gib_per_hour * GIB_IN_GB * price_out * e)
    m.minimize(mathopt.fast_sum(obj_terms))

    params = mathopt.SolveParameters(
        time_limit=_td(time_limit_s), relative_gap_tolerance=1e-4, random_seed=seed
    )
    model_params = None
    if hint:
        hint_vals: dict[mathopt.Variable, float] = {}
        for key, val in hint.items():
            if key in x:
                hint_vals[x[key]] = float(val)
        if hint_vals:
            model_params = mathopt.ModelSolveParameters(solution_hints=[mathopt.SolutionHint(hint_vals)])
    res = mathopt.solve(m, mathopt.SolverType.HIGHS, params=params, model_params=model_params)
    reason = res.termination.reason
    if reason in (mathopt.TerminationReason.INFEASIBLE, mathopt.TerminationReason.INFEASIBLE_OR_UNBOUNDED):
        return "infeasible", {}, math.inf, math.inf
    if not res.has_primal_feasible_solution():
        return "unknown", {}, math.inf, float(res.termination.objective_bounds.dual_bound)
    vals = res.variable_values(list(x.values()))
    sol = {key: round(v) for key, v in zip(x.keys(), vals, strict=True) if round(v) > 0}
    status = "optimal" if reason == mathopt.TerminationReason.OPTIMAL else "feasible"
    bound = float(res.termination.objective_bounds.dual_bound)
    return status, sol, float(res.objective_value()), bound


def per_site_vars(per_site: dict[int, list[mathopt.Variable]]) -> list[mathopt.Variable]:
    return [v for vs in per_site.values() for v in vs]


def _td(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=max(0.05, seconds))
