"""Pareto fronts: non-dominated, sorted by cost, each point a full placement."""

from __future__ import annotations

from broker.core.domain import UserRegion, Workload
from broker.solver.pareto import MIN_SOLVE_S, _Budget, pareto_fronts

from .support.catalog import problem
from .support.checks import assert_valid

# RTT from each synthetic site to the two user regions: EU sites near EU users, US sites near US users
RTT = {"eu": [8.0, 12.0, 95.0, 100.0, 2.0], "us": [92.0, 98.0, 6.0, 15.0, 94.0]}


def test_fronts_trade_cost_against_latency_and_carbon() -> None:
    ws = [Workload("api", 6, 1, 2), Workload("worker", 4, 2, 8)]
    p = problem(ws, regions=(UserRegion("eu", 50.1, 8.7), UserRegion("us", 40.7, -74.0)), rtt=RTT)
    fronts = pareto_fronts(p, time_limit_s=20)
    for name, axis in (("cost_latency", "latency_ms"), ("cost_carbon", "carbon_kg_per_hour")):
        pts = fronts[name]
        assert pts, name
        costs = [pt.cost_per_hour for pt in pts]
        assert costs == sorted(costs)
        for a in pts:
            assert_valid(p, a.result)
            assert not any(
                (b.cost_per_hour <= a.cost_per_hour and getattr(b, axis) < getattr(a, axis) - 1e-9)
                or (b.cost_per_hour < a.cost_per_hour - 1e-9 and getattr(b, axis) <= getattr(a, axis))
                for b in pts
            ), "a dominated point was kept"
        # along the front, paying more buys a better value on the other axis
        values = [getattr(pt, axis) for pt in pts]
        assert values == sorted(values, reverse=True)
    assert fronts["cost_carbon"][-1].carbon_kg_per_hour < fronts["cost_carbon"][0].carbon_kg_per_hour


def test_the_sweep_budget_passes_time_left_by_fast_solves_to_later_ones() -> None:
    budget = _Budget(30.0, solves_left=3)
    assert 9.5 < budget.next_solve() <= 10.0  # a third each while nothing has run
    assert 14.0 < budget.next_solve() <= 15.0  # the first returned at once: its time is shared
    assert _Budget(0.1, solves_left=30).next_solve() == MIN_SOLVE_S  # never below a useful solve
