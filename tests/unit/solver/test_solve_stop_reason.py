"""Why solve() stopped (`stop_reason`, solve.py), on small instances: each reason where it
happens, and the rule that tells a search that ran out of time from one that stalled."""

from __future__ import annotations

import pytest

from broker.core.domain import PlacementResult, StopReason, Workload
from broker.errors import Infeasible
from broker.problems import error_problem
from broker.solver import SolverOptions, solve
from broker.solver.solve import stop_reason

from .support.catalog import problem, table
from .support.checks import assert_valid

# a time limit that only guards: these searches end by proving or stalling within a fraction of a
# second at rest, and a loaded machine (the suite's parallel workers, other jobs) must not turn
# them into TIME_LIMIT
GUARD_S = 30.0


def _mixed(n: int) -> list[Workload]:
    """n workloads of mixed shapes, half of them spread over two sites: their LP is fractional."""
    return [
        Workload(f"w{i}", replicas=3 + i % 4, cpu=1 + i % 3, memory_gib=2 + 2 * (i % 5), min_sites=1 + i % 2)
        for i in range(n)
    ]


def _solved(ws: list[Workload], limit: float, opts: SolverOptions) -> PlacementResult:
    p = problem(ws)
    res = solve(p, time_limit_s=limit, options=opts)
    assert_valid(p, res)
    assert res.time_limit_s == limit  # the answer says what time it was given
    return res


def test_a_placement_proven_optimal_says_optimal() -> None:
    res = _solved([Workload("odd", replicas=4, cpu=3, memory_gib=6)], GUARD_S, SolverOptions())
    assert (res.status, res.gap_pct, res.stop_reason) == ("optimal", 0.0, StopReason.OPTIMAL)


def test_a_placement_within_the_target_gap_says_gap_target() -> None:
    # a loose target: the converged LP proves it at once, short of optimal
    res = _solved(_mixed(3), GUARD_S, SolverOptions(rel_gap=0.3))
    assert 0.01 < res.gap_pct <= 30.0
    assert res.stop_reason == StopReason.GAP_TARGET


def test_a_search_out_of_time_says_time_limit() -> None:
    # 30 workloads in a fraction of a second: no phase can finish, the gap stays open
    res = _solved(_mixed(30), 0.2, SolverOptions())
    assert res.gap_pct > 1.0
    assert res.stop_reason == StopReason.TIME_LIMIT


def test_a_search_with_nothing_left_to_try_says_stall() -> None:
    # one round of column generation: the LP never converges, so no bound proves the target,
    # and the neighbourhoods run out of moves long before the time does
    res = _solved([Workload("odd", replicas=4, cpu=3, memory_gib=6)], GUARD_S, SolverOptions(max_cg_rounds=1))
    assert res.gap_pct > 1.0
    assert res.stop_reason == StopReason.STALL
    assert res.solve_ms < 0.7 * GUARD_S * 1000


@pytest.mark.parametrize(
    "ws",
    [
        [Workload("huge", replicas=1, cpu=512, memory_gib=2)],  # no pool is big enough: found in preparation
        [Workload("owned", replicas=40, cpu=2, memory_gib=4, providers=("private",))],  # owned capacity runs out
    ],
    ids=["prepare", "capacity"],
)
def test_an_infeasible_request_says_infeasible_in_its_problem_document(ws: list[Workload]) -> None:
    with pytest.raises(Infeasible) as exc:
        solve(problem(ws, tbl=table(owned_nodes=1)), time_limit_s=5.0)
    doc = error_problem(exc.value, instance="/v1/placements")
    assert doc["status"] == 422 and doc["conflicts"]
    # nothing timed in it: a failed job carries exactly the synchronous answer's document
    assert doc["stop_reason"] == "infeasible" and "solve_ms" not in doc


@pytest.mark.parametrize(
    ("gap", "unused", "expected"),
    [
        (0.0, 0.9, StopReason.OPTIMAL),
        (0.01, 0.0, StopReason.OPTIMAL),
        (0.5, 0.9, StopReason.GAP_TARGET),
        (1.0, 0.0, StopReason.GAP_TARGET),
        (1.5, 0.0, StopReason.TIME_LIMIT),
        (1.5, 0.29, StopReason.TIME_LIMIT),
        (1.5, 0.3, StopReason.STALL),
        (24.0, 0.8, StopReason.STALL),
    ],
)
def test_the_rule_between_gap_time_and_stall(gap: float, unused: float, expected: StopReason) -> None:
    assert stop_reason(gap, rel_gap=0.01, unused_share=unused, stall_unused_share=0.3) == expected
