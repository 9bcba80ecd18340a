"""Re-plans move only what pays off: migration cost per moved replica and a cap on moves."""

from __future__ import annotations

import dataclasses

import pytest

from broker.core.domain import CapacityType, PlacementResult, Workload
from broker.solver import solve

from .support.catalog import problem, tied_table
from .support.checks import assert_valid

# running now on the dearest site's on-demand medium nodes (1.1 x the cheapest site's price)
CURRENT = (("api", "aws:eu-central-1/medium/ondemand", 4),)


def _replan(cost: float, max_moves: int | None):  # type: ignore[no-untyped-def]
    p = problem([Workload("api", 4, 2, 8)])
    req = dataclasses.replace(p.request, current=CURRENT, migration_cost_per_replica=cost, max_moves=max_moves)
    p = dataclasses.replace(p, request=req)
    res = solve(p, time_limit_s=10)
    assert_valid(p, res)
    stayed = sum(a.replicas for a in res.assignments if a.pool == CURRENT[0][1])
    return res, stayed


@pytest.mark.parametrize(
    ("cost", "max_moves", "expect_stay"),
    [
        (0.0, None, 0),  # moving is free: go to the cheapest pool
        (1000.0, None, 4),  # moving costs more than it saves over the horizon: stay
        (0.0, 2, 2),  # free, but at most two replicas may move
    ],
)
def test_replan_moves_only_what_pays_off(cost: float, max_moves: int | None, expect_stay: int) -> None:
    res, stayed = _replan(cost, max_moves)
    assert stayed == expect_stay
    assert any(w.startswith(f"moves: {4 - expect_stay} of 4") for w in res.warnings)
    assert res.lower_bound_per_hour <= res.objective_value + 1e-6


def _replan_on_a_tied_pool(replicas: int, running: int) -> tuple[str, float, PlacementResult]:
    """Three pools of one price at three sites; `running` replicas run now on a pool a fresh
    search for `replicas` does not pick. (that pool, the fresh answer's cost, the re-plan's answer)"""
    od = CapacityType.ONDEMAND
    tbl = tied_table([(0, "a", od, 0.1, None), (1, "b", od, 0.1, None), (2, "c", od, 0.1, None)])
    fresh = solve(problem([Workload("api", replicas, 1, 1)], tbl=tbl), time_limit_s=5)
    elsewhere = next(pid for pid in tbl.pools.ids if pid not in {a.pool for a in fresh.assignments})
    p = problem([Workload("api", replicas, 1, 1)], tbl=tbl)
    p = dataclasses.replace(p, request=dataclasses.replace(p.request, current=(("api", elsewhere, running),)))
    res = solve(p, time_limit_s=5)
    assert_valid(p, res)
    return elsewhere, fresh.cost_per_hour, res


def test_a_replan_stays_on_an_equally_cheap_placement_in_force() -> None:
    """Whichever pool of one price the request runs on now, it stays there (moving would gain
    nothing), rather than on the pool a fresh search picks."""
    elsewhere, fresh_cost, res = _replan_on_a_tied_pool(4, 4)
    assert [(a.pool, a.replicas) for a in res.assignments] == [(elsewhere, 4)]
    assert res.cost_per_hour == pytest.approx(fresh_cost)


def test_a_replan_that_scales_up_keeps_what_runs_and_adds_beside_it() -> None:
    """The placement in force, brought to the new replica count, is the re-plan's start: the
    running replicas stay and the new ones join them, where a fresh search would pick another
    pool of the same price."""
    elsewhere, _, res = _replan_on_a_tied_pool(6, 4)
    assert [(a.pool, a.replicas) for a in res.assignments] == [(elsewhere, 6)]
    assert any(w.startswith("moves: 0 of 4") for w in res.warnings)
