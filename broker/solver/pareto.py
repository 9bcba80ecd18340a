"""Cost-latency and cost-carbon Pareto fronts by a sweep of objective weights.

Each point is a full placement solved with weights (cost=1, latency or carbon=lambda); the
fronts keep the points no other point beats on both axes. Weighted sums find the supported
points of a front, which is what a FinOps team trades between. A small request can have fewer
than five supported points, so the front is then filled epsilon-constraint style: starting from
the cheapest point, the worst site it uses (highest mean user RTT, or highest grid intensity) is
closed and the request solved again, which also finds points between the supported ones.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from broker.core.domain import Objective, PlacementResult
from broker.errors import Infeasible
from broker.solver.options import SolverOptions
from broker.solver.problem import PlacementProblem
from broker.solver.solve import solve

# lambda ranges: a replica costs ~0.01-1 USD/h, a user RTT is ~0.01-0.3 s, a node ~0.01-0.1 kg CO2e/h
LATENCY_WEIGHTS = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
CARBON_WEIGHTS = (0.0, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)


@dataclass(frozen=True)
class ParetoPoint:
    weights: Objective
    cost_per_hour: float
    latency_ms: float  # replica-weighted mean RTT to the request's user regions
    carbon_kg_per_hour: float
    result: PlacementResult


def mean_latency_ms(result: PlacementResult) -> float:
    total = sum(a.replicas for a in result.assignments)
    if not total:
        return 0.0
    acc = 0.0
    for a in result.assignments:
        if a.latency_ms:
            acc += a.replicas * float(np.mean(list(a.latency_ms.values())))
    return acc / total


def carbon_kg_per_hour(problem: PlacementProblem, result: PlacementResult) -> float:
    t = problem.table
    power = problem.node_power_kw()
    total = 0.0
    for n in result.nodes:
        p = t.pool_index[n.pool]
        g = t.sites[int(t.site_idx[p])].carbon_g_per_kwh or 0.0
        total += n.count * float(power[p]) * g / 1000.0
    return total


def _front(points: list[ParetoPoint], axis: str) -> list[ParetoPoint]:
    def key(p: ParetoPoint) -> tuple[float, float]:
        return (round(p.cost_per_hour, 6), round(getattr(p, axis), 6))

    distinct = {key(p): p for p in points}
    out = [p for k, p in distinct.items() if not any(o != k and o[0] <= k[0] and o[1] <= k[1] for o in distinct)]
    return sorted(out, key=lambda p: p.cost_per_hour)


def pareto_fronts(
    problem: PlacementProblem, *, time_limit_s: float, seed: int = 0, options: SolverOptions | None = None
) -> dict[str, list[ParetoPoint]]:
    """{"cost_latency": [...], "cost_carbon": [...]}, each sorted by cost (cheapest first);
    every point solved with `options`."""
    sweeps = {
        "cost_latency": ("latency_ms", [Objective(1.0, w, 0.0) for w in LATENCY_WEIGHTS]),
        "cost_carbon": ("carbon_kg_per_hour", [Objective(1.0, 0.0, w) for w in CARBON_WEIGHTS]),
    }
    budget = _Budget(time_limit_s, solves_left=sum(len(ws) for _, ws in sweeps.values()) + 2 * FILL_STEPS)
    out: dict[str, list[ParetoPoint]] = {}
    for name, (axis, objectives) in sweeps.items():
        points: list[ParetoPoint] = []
        for obj in objectives:
            req = dataclasses.replace(problem.request, objective=obj)
            sub = dataclasses.replace(problem, request=req)
            res = solve(sub, time_limit_s=budget.next_solve(), seed=seed, options=options)
            points.append(_point(problem, obj, res))
        front = _front(points, axis)
        if len(front) < MIN_POINTS:
            front = _front(points + _fill(problem, axis, front[0], budget, seed, options), axis)
        else:
            budget.skip(FILL_STEPS)
        out[name] = front
    return out


MIN_POINTS = 5
FILL_STEPS = 6
MIN_SOLVE_S = 0.5


@dataclass
class _Budget:
    """The sweep's time shared among its solves: a solve that finishes early leaves its time to
    the ones after it, so small requests get every point solved to optimality on a loaded host."""

    time_limit_s: float
    solves_left: int
    deadline: float = field(init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.time_limit_s

    def next_solve(self) -> float:
        share = (self.deadline - time.monotonic()) / max(1, self.solves_left)
        self.solves_left -= 1
        return max(MIN_SOLVE_S, share)

    def skip(self, n: int) -> None:
        self.solves_left = max(0, self.solves_left - n)


def _point(problem: PlacementProblem, obj: Objective, res: PlacementResult) -> ParetoPoint:
    return ParetoPoint(
        weights=obj,
        cost_per_hour=res.cost_per_hour,
        latency_ms=mean_latency_ms(res),
        carbon_kg_per_hour=carbon_kg_per_hour(problem, res),
        result=res,
    )


def _site_scores(problem: PlacementProblem, axis: str) -> np.ndarray:
    t = problem.table
    if axis == "latency_ms":
        if not problem.user_rtt:
            return np.zeros(t.n_sites)
        return np.asarray(np.vstack(list(problem.user_rtt.values())).mean(axis=0))
    return np.array([s.carbon_g_per_kwh or 0.0 for s in t.sites])


def _fill(
    problem: PlacementProblem, axis: str, start: ParetoPoint, budget: _Budget, seed: int, options: SolverOptions | None
) -> list[ParetoPoint]:
    """Points further along `axis`: close the worst-scoring site the last point uses, re-solve."""
    t = problem.table
    score = _site_scores(problem, axis)
    closed = np.zeros(t.n_sites, dtype=bool)
    out: list[ParetoPoint] = []
    last = start
    for step in range(FILL_STEPS):
        used = {t.site_index[a.site] for a in last.result.assignments}
        scored = [s for s in used if score[s] > 0]
        if not scored:
            budget.skip(FILL_STEPS - step)
            break
        worst = max(score[s] for s in scored)
        closed |= score >= worst
        table = dataclasses.replace(t, max_nodes=np.where(closed[t.site_idx], 0.0, t.max_nodes))
        try:
            res = solve(
                dataclasses.replace(problem, table=table), time_limit_s=budget.next_solve(), seed=seed, options=options
            )
        except Infeasible:
            budget.skip(FILL_STEPS - step - 1)
            break
        last = _point(problem, start.weights, res)
        out.append(last)
    return out
