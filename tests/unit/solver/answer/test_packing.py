"""Exact packing inside solve(): the answer's nodes are the packing's, its cost, bound and gap
stay honest, owned pools that cannot hold their replicas are repaired."""

from __future__ import annotations

import pytest

from broker.core.domain import CapacityType, Workload
from broker.solver import SolverOptions, solve
from tests.unit.solver.support.catalog import problem, tied_table
from tests.unit.solver.support.checks import assert_packed, assert_valid

OD = CapacityType.ONDEMAND


def test_replicas_above_half_a_node_are_counted_by_the_model() -> None:
    # three replicas of 1.1-1.3 vCPUs: 3.6 vCPUs fit two 2-vCPU nodes by the aggregate rule, yet
    # no two of them share a node: the half rows know it, so packing adds nothing
    pr = problem(
        [Workload("a", 1, 1.2, 1.0), Workload("b", 1, 1.1, 1.0), Workload("c", 1, 1.3, 1.0)],
        tbl=tied_table([(0, "od", OD, 1.0, None)]),
    )
    res = solve(pr, time_limit_s=5)
    assert_valid(pr, res)
    assert res.packing is not None
    assert (res.packing.aggregate_nodes, res.packing.nodes) == (3, 3)
    assert res.cost_per_hour == pytest.approx(3.0) and res.status == "optimal"
    assert not any(w.startswith("exact packing") for w in res.warnings)


def _thirds() -> list[Workload]:
    """Five replicas of 0.66-0.70 vCPUs, each its own class: 3.4 vCPUs fit two 2-vCPU nodes by the
    aggregate rule (and no half row sees them), yet no node holds three of them."""
    return [Workload(f"w{i}", 1, 0.66 + 0.01 * i, 0.5) for i in range(5)]


def test_fragmented_replicas_open_a_node_and_the_gap_is_recomputed() -> None:
    # the aggregate rule alone (no pattern cuts or counts: with them the model sees the third node)
    blind = SolverOptions(pattern_cut_rounds=0, pattern_cut_mip_rounds=0, pattern_nodes_max_classes=0)
    pr = problem(_thirds(), tbl=tied_table([(0, "od", OD, 1.0, None)]))
    res = solve(pr, time_limit_s=5, options=blind)
    assert_valid(pr, res)
    assert res.packing is not None
    assert (res.packing.aggregate_nodes, res.packing.nodes) == (2, 3)
    assert res.packing.aggregate_cost_per_hour == pytest.approx(2.0)
    assert res.cost_per_hour == pytest.approx(3.0) and res.nodes[0].count == 3
    # the aggregate model's bound still holds for the packed answer, and the gap is against it
    assert res.lower_bound_per_hour <= 2.0 + 1e-6
    assert res.gap_pct == pytest.approx((3.0 - res.lower_bound_per_hour) / 3.0 * 100, abs=1e-2)
    assert res.status == "feasible"
    assert any(w.startswith("exact packing: the replicas need more nodes") for w in res.warnings)


def test_an_owned_pool_that_cannot_hold_its_replicas_moves_some_to_another_pool() -> None:
    # two cheap owned nodes hold the five replicas by the aggregate rule, but only four by packing
    tbl = tied_table([(0, "owned", CapacityType.RESERVED, 0.01, 2), (0, "od", OD, 1.0, None)])
    pr = problem(_thirds(), tbl=tbl)
    res = solve(pr, time_limit_s=5)
    assert_valid(pr, res)  # owned capacity kept
    assert res.packing is not None and res.packing.moved_replicas == 1
    by_pool = {"owned": 0, "od": 0}
    for a in res.assignments:
        by_pool[a.pool.split("/")[1]] += a.replicas
    assert by_pool == {"owned": 4, "od": 1}
    assert res.cost_per_hour == pytest.approx(1.02)
    assert any("moved off owned pools" in w for w in res.warnings)


def test_max_per_node_is_priced_by_the_model_and_kept_by_the_packing() -> None:
    pr = problem([Workload("web", 4, 0.25, 0.5, max_per_node=1), Workload("job", 4, 0.25, 0.5)])
    res = solve(pr, time_limit_s=5)
    assert_valid(pr, res)  # no node runs two replicas of web
    assert res.packing is not None
    # the model's fit rows know the limit: packing needs no node the model did not count
    assert res.packing.nodes == res.packing.aggregate_nodes
    web_nodes = [n for n in res.node_assignments if any(r.workload == "web" for r in n.replicas)]
    assert len(web_nodes) == 4


def test_packing_is_deterministic() -> None:
    ws = [
        Workload(f"w{i}", r, c, m) for i, (r, c, m) in enumerate([(3, 1.5, 3), (5, 0.7, 2.5), (2, 3, 10), (7, 1.2, 1)])
    ]
    pr = problem(ws)
    runs = [solve(pr, time_limit_s=5, seed=0).node_assignments for _ in range(2)]
    assert runs[0] == runs[1]
    assert_packed(pr, solve(pr, time_limit_s=5, seed=0))


def test_without_time_for_cp_sat_the_packing_is_ffd_and_still_packs() -> None:
    pr = problem(
        [Workload("a", 4, 1.5, 2.0), Workload("b", 3, 1.0, 4.0), Workload("c", 3, 2.0, 4.0)],
        tbl=tied_table([(0, "od", OD, 1.0, None)]),
    )
    res = solve(pr, time_limit_s=5, options=SolverOptions(packing_max_s=0.0))
    assert_valid(pr, res)
    assert res.packing is not None and res.packing.pools_cp_sat == 0
