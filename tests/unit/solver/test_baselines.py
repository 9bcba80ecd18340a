"""Both baselines give valid placements; the broker never pays more than either."""

from __future__ import annotations

import pytest

from broker.domain import CapacityType, Workload
from broker.solver import solve
from broker.solver.baselines import baseline_costs

from .checks import assert_valid
from .synthetic import GDPR, US_ONLY, problem

CASES = {
    "mixed": [
        Workload("api", 4, 1, 2, min_sites=2, residency=GDPR),
        Workload("db", 2, 4, 24, residency=GDPR),
        Workload("batch", 6, 2, 4, capacity_types=(CapacityType.SPOT, CapacityType.ONDEMAND), max_spot_fraction=0.5),
        Workload("us", 3, 0.5, 1, residency=US_ONLY),
    ],
    "many-small": [Workload(f"s{i}", 2, 0.5, 1) for i in range(10)],
}


@pytest.mark.parametrize("name", list(CASES))
def test_broker_beats_or_matches_both_baselines(name: str) -> None:
    p = problem(CASES[name])
    res = solve(p, time_limit_s=10)
    assert_valid(p, res)
    costs = baseline_costs(p)
    assert set(costs) == {"cheapest_fit", "kubernetes"}
    for policy, cost in costs.items():
        assert cost is not None, policy
        assert res.cost_per_hour <= cost + 1e-6, (policy, cost, res.cost_per_hour)
    assert res.baseline.cost_per_hour == pytest.approx(costs["cheapest_fit"], abs=1e-5)
