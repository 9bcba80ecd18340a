"""Replan decisions: a move is made when it pays for its migration cost, kept otherwise."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from broker.app import Broker
from broker.core.domain import NodeAllocation
from broker.db.session import transaction
from broker.dispatch.documents import ReplanIn
from broker.dispatch.replan import ReplanService
from broker.placements.store import PlacementStore
from tests.integration.dispatch_support import EXAMPLES, replicas_by_workload, store_checkout, stored_document

# a valid but dear home for orders-db (2 x 4 vCPU / 16 GiB): one m6i.4xlarge per replica
DEAR_POOL, DEAR_SITE, DEAR_PRICE = "aws:eu-central-1/m6i.4xlarge/ondemand", "aws:eu-central-1", 0.92


def _store_dear_variant(broker: Broker, placement: dict[str, Any]) -> str:
    """The same request stored with orders-db on dearer nodes, as if prices had moved since."""
    original = broker.get_placement(placement["id"])
    r = original.result
    db = [a for a in r.assignments if a.workload == "orders-db"]
    db_pools = {a.pool for a in db}
    result = replace(
        r,
        status="optimal",
        cost_per_hour=r.cost_per_hour + 1.0,
        baseline=replace(r.baseline, cost_per_hour=None),
        savings_pct=None,
        assignments=(
            *(a for a in r.assignments if a.workload != "orders-db"),
            replace(db[0], pool=DEAR_POOL, site=DEAR_SITE, replicas=sum(a.replicas for a in db)),
        ),
        nodes=(
            *(n for n in r.nodes if n.pool not in db_pools),
            NodeAllocation(DEAR_POOL, 2, 2 * DEAR_PRICE),
        ),
    )
    pid = "pl_DEAR" + placement["id"][7:]
    dear = replace(original, id=pid, created_at=datetime.now(UTC), result=result, prices=None)
    with transaction(broker.sessions) as s:
        PlacementStore.add(s, dear)
    return pid


@pytest.mark.parametrize(("cost_per_replica", "decision"), [(0.05, "migrate"), (1_000_000.0, "keep")])
def test_move_only_when_savings_over_the_horizon_pay_for_it(
    broker: Broker, cost_per_replica: float, decision: str
) -> None:
    placement = store_checkout(broker)
    dear = _store_dear_variant(broker, placement)
    svc = ReplanService(broker)
    out = svc.replan(dear, ReplanIn(reason="prices", migration_cost_per_replica=cost_per_replica))
    assert out["forced_by"] == [] and out["decision"] == decision
    assert out["old_cost_per_hour_now"] > out["new_cost_per_hour"]
    moved = out["migration"]["moved_replicas"]
    assert moved >= 2 and out["migration_cost"] == pytest.approx(moved * cost_per_replica)
    assert out["payback_hours"] == pytest.approx(out["migration_cost"] / out["savings_per_hour"], abs=0.01)
    if decision == "migrate":
        new = stored_document(broker, out["new_placement_id"])
        assert replicas_by_workload(new["assignments"]) == replicas_by_workload(placement["assignments"])
        assert DEAR_POOL not in {a["pool"] for a in new["assignments"]}
        # a re-plan's savings are against the placement in force, the greedy figure second
        base = new["baseline"]
        assert base["policy"] == "placement-in-force"
        assert new["savings_pct"] == pytest.approx((1 - new["cost_per_hour"] / base["cost_per_hour"]) * 100, abs=0.01)
        # the placement in force, repacked by the contract's rule, needs no more nodes than it holds
        assert new["cost_per_hour"] < base["cost_per_hour"] <= out["old_cost_per_hour_now"] + 1e-6
        assert [b["policy"] for b in new["baselines"]][1:] == [
            "kubernetes-packer",
            "kubernetes-packer-home-cloud",
            "greedy-cheapest-fit",
        ]
    else:
        assert out["new_placement_id"] is None
    assert svc.get(out["id"])["decision"] == decision


def test_demand_change_forces_a_move_and_the_plan_scales_up_before_it_scales_down(broker: Broker) -> None:
    placement = store_checkout(broker)
    out = ReplanService(broker).replan(
        placement["id"], ReplanIn(reason="demand", replicas={"checkout-api": 12}, disruption_budget=3, dry_run=True)
    )
    assert out["decision"] == "migrate" and out["forced_by"] and out["new_placement_id"] is None
    assert sum(a["replicas"] for a in out["new_placement"]["assignments"] if a["workload"] == "checkout-api") == 12
    steps = out["migration"]["steps"]
    assert all(abs(s["to_replicas"] - s["from_replicas"]) <= 3 for s in steps)
    assert out["migration"]["added_replicas"] - out["migration"]["removed_replicas"] == 6


def test_the_replan_schedules_its_waves_under_each_workloads_max_unavailable(broker: Broker) -> None:
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    doc["dry_run"] = False
    for w in doc["workloads"]:
        if w["name"] == "checkout-api":
            w["max_unavailable"] = 2  # extension: the workload's own disruption budget
    placement, stored = broker.place(doc)
    assert stored and placement.request["workloads"][0].get("max_unavailable") in (2, None)
    out = ReplanService(broker).replan(
        str(placement.id),
        ReplanIn(reason="demand", replicas={"checkout-api": 12}, disruption_budget=5, dry_run=True),
    )
    plan = out["migration"]
    schedule = plan["schedule"]
    assert schedule["max_unavailable"]["checkout-api"] == 2
    assert plan["makespan_s"] == schedule["makespan_s"] == max(s["end_s"] for s in plan["steps"])
    assert schedule["makespan_s"] <= schedule["advisory_makespan_s"]
    # at no moment are more than 2 of checkout-api's replicas starting or stopping
    moments = {s["start_s"] for s in plan["steps"]}
    for t in moments:
        busy = sum(
            abs(s["to_replicas"] - s["from_replicas"])
            for s in plan["steps"]
            if s["workload"] == "checkout-api" and s["start_s"] <= t < s["end_s"]
        )
        assert busy <= 2
    assert [w["start_s"] for w in schedule["waves"]] == sorted({s["start_s"] for s in plan["steps"]})


def _count_solves(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every solve's time limit, in call order."""
    import broker.app as app_mod

    limits: list[float] = []
    real = app_mod.solve

    def counted(problem: Any, *, time_limit_s: float, **kw: Any) -> Any:
        limits.append(time_limit_s)
        return real(problem, time_limit_s=time_limit_s, **kw)

    monkeypatch.setattr(app_mod, "solve", counted)
    return limits


def test_a_move_that_pays_is_solved_once_and_stored(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    placement = store_checkout(broker)
    dear = _store_dear_variant(broker, placement)
    limits = _count_solves(monkeypatch)
    out = ReplanService(broker).replan(dear, ReplanIn(reason="prices"))
    assert out["decision"] == "migrate" and out["new_placement_id"] is not None
    # the answer the decision was made on is the one stored: no second solve to store it
    assert len(limits) == 1
    stored = stored_document(broker, out["new_placement_id"])
    assert stored["cost_per_hour"] == out["new_cost_per_hour"]
    assert replicas_by_workload(stored["assignments"]) == replicas_by_workload(out["new_placement"]["assignments"])


def test_the_replan_solves_within_what_is_left_of_its_time_limit(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from broker.dispatch.replan import after_solve_s

    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    doc["dry_run"], doc["time_limit_s"] = False, 2
    placement, _ = broker.place(doc)
    limits = _count_solves(monkeypatch)
    out = ReplanService(broker).replan(str(placement.id), ReplanIn(reason="demand", replicas={"checkout-api": 12}))
    replicas = sum(int(w["replicas"]) for w in out["new_placement"]["assignments"])
    # the request's 2 s are the whole re-plan's: the solve gets them less loading and what follows it
    assert len(limits) == 1 and 0 < limits[0] <= 2 - after_solve_s(replicas, 2.0)
    assert out["new_placement"]["time_limit_s"] == pytest.approx(limits[0], abs=0.01)


def test_after_solve_reserve_grows_with_replicas_and_keeps_half_the_limit() -> None:
    from broker.dispatch.replan import after_solve_s

    assert after_solve_s(10, 1.0) < after_solve_s(1_000, 1.0) <= 0.5
    assert after_solve_s(100_000, 1.0) == 0.5 and after_solve_s(1_000, 60.0) == pytest.approx(0.65)
