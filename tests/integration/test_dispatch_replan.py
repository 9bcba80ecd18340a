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
