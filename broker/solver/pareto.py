"""Cost-latency and cost-carbon Pareto fronts by a sweep of objective weights.

Each point is a full placement solved with weights (cost=1, latency or carbon=lambda); the
fronts keep the points no other point beats on both axes. Weighted sums find the supported
points of a front, which is what a FinOps team trades between.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from broker.domain import Objective, PlacementResult
from broker.errors import Infeasible
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


def pareto_fronts(problem: PlacementProblem, *, time_limit_s: float, seed: int = 0) -> dict[str, list[ParetoPoint]]:
    """{"cost_latency": [...], "cost_carbon": [...]}, each sorted by cost (cheapest first)."""
    sweeps = {
        "cost_latency": ("latency_ms", [Objective(1.0, w, 0.0) for w in LATENCY_WEIGHTS]),
        "cost_carbon": ("carbon_kg_per_hour", [Objective(1.0, 0.0, w) for w in CARBON_WEIGHTS]),
    }
    n_solves = sum(len(ws) for _, ws in sweeps.values())
    per_solve = max(0.5, time_limit_s / n_solves)
    out: dict[str, list[ParetoPoint]] = {}
    for name, (axis, objectives) in sweeps.items():
        points: list[ParetoPoint] = []
        for obj in objectives:
            req = dataclasses.replace(problem.request, objective=obj)
            sub = dataclasses.replace(problem, request=req)
            try:
                res = solve(sub, time_limit_s=per_solve, seed=seed)
            except Infeasible:
                raise
            points.append(
                ParetoPoint(
                    weights=obj,
                    cost_per_hour=res.cost_per_hour,
                    latency_ms=mean_latency_ms(res),
                    carbon_kg_per_hour=carbon_kg_per_hour(problem, res),
                    result=res,
                )
            )
        out[name] = _front(points, axis)
    return out
