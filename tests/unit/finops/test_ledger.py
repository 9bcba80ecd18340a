"""The savings ledger's pure core: cost items, supersession, aggregation."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from broker.core.domain import Baseline
from broker.finops.ledger import (
    EGRESS,
    NO_TEAM,
    LedgerEntry,
    entry_from_placement,
    items_from_placement,
    ondemand_counterpart,
    series,
    summarize,
)
from tests.placements import assignment, placement

T0 = datetime(2026, 11, 1, tzinfo=UTC)

REQUEST = {
    "workloads": [
        {"name": "api", "storage_gib": 10, "labels": {"team": "payments"}},
        {"name": "db", "storage_gib": 100},
    ]
}
SPOT, ONDEMAND = "aws:eu-central-1/m6i.xlarge/spot", "gcp:europe-west1/e2-standard-4/ondemand"
PLACEMENT = placement(
    [
        assignment("api", SPOT, 3, 0.4, breakdown={"compute": 0.3, "storage": 0.1}),
        assignment("db", SPOT, 1, 0.4, breakdown={"compute": 0.3, "storage": 0.1}),
        assignment("db", ONDEMAND, 1, 0.6, breakdown={"compute": 0.5, "storage": 0.1}),
    ],
    nodes=[(SPOT, 2, 0.6), (ONDEMAND, 1, 0.5)],
    request=REQUEST,
    cost_per_hour=1.45,
    baseline_cost_per_hour=2.7,
    greedy_cost_per_hour=4.0,
    egress_cost_per_hour=0.05,
    id="pl_1",
    tenant="t",
    name="svc",
    created_at=T0,
)


def _entry(pid: str = "pl_1", name: str = "svc", hours_ago: float = 10.0, **kw: object) -> LedgerEntry:
    base = dict(placement_id=pid, tenant="t", name=name, created_at=T0 - timedelta(hours=hours_ago),
                superseded_at=None, cost_per_hour=1.0, baseline_cost_per_hour=3.0, has_baseline=True)  # fmt: skip
    base.update(kw)
    return LedgerEntry(**base)  # type: ignore[arg-type]


def test_items_add_up_to_the_plan_and_allocate_the_baseline() -> None:
    entry = entry_from_placement(PLACEMENT)
    items = items_from_placement(entry, PLACEMENT, lambda p: 0.4 if p.endswith("/spot") else None)
    assert sum(i.cost_per_hour for i in items) == pytest.approx(1.45)  # nodes 1.1 + storage 0.3 + egress
    assert sum(i.baseline_cost_per_hour for i in items) == pytest.approx(2.7)
    assert sum(i.greedy_cost_per_hour for i in items) == pytest.approx(4.0)  # the second figure, allocated alike
    assert (entry.baseline_policy, entry.greedy_cost_per_hour) == ("kubernetes-packer", 4.0)
    compute = [i for i in items if i.kind == "compute"]
    # the spot pool's node cost (0.6) splits between api and db by their compute shares
    assert sum(i.cost_per_hour for i in compute if i.pool and "m6i" in i.pool) == pytest.approx(0.6)
    assert {i.team for i in items if i.workload == "api"} == {"payments"}
    assert {i.team for i in items if i.workload == "db"} == {NO_TEAM}
    spot = next(i for i in compute if i.workload == "api")
    assert (spot.quantity, spot.unit_price_per_hour, spot.list_unit_price_per_hour) == (2, 0.3, 0.4)
    ondemand = next(i for i in compute if i.pool and i.pool.endswith("/ondemand"))
    assert ondemand.list_unit_price_per_hour == ondemand.unit_price_per_hour  # no dearer list price known
    storage = [i for i in items if i.kind == "storage"]
    assert sorted(i.quantity for i in storage) == [30.0, 100.0, 100.0]  # GiB per replica x replicas
    egress = [i for i in items if i.kind == "egress"]
    assert sum(i.cost_per_hour for i in egress) == pytest.approx(0.05)
    assert {i.provider for i in egress} == {EGRESS}


def test_a_placement_without_baseline_saves_nothing() -> None:
    no_baseline = replace(PLACEMENT.result, baseline=Baseline("kubernetes-packer", None))
    e = entry_from_placement(replace(PLACEMENT, result=no_baseline))
    assert (e.has_baseline, e.savings_per_hour) == (False, 0.0)


def test_a_placement_stored_before_the_headline_baseline_claims_no_savings() -> None:
    # stored before 0018: its one baseline is greedy's; the home packer was never computed for it
    old = replace(PLACEMENT.result, baseline=Baseline("greedy-cheapest-fit", 2.7), baselines=())
    e = entry_from_placement(replace(PLACEMENT, result=old))
    assert (e.has_baseline, e.baseline_policy, e.savings_per_hour) == (False, None, 0.0)
    assert e.greedy_cost_per_hour == 2.7  # kept as the second figure
    items = items_from_placement(e, replace(PLACEMENT, result=old))
    assert sum(i.baseline_cost_per_hour for i in items) == pytest.approx(1.45)
    assert sum(i.greedy_cost_per_hour for i in items) == pytest.approx(2.7)
    totals, _ = summarize([e], items, group_by="team", start=T0, end=T0 + timedelta(hours=2))
    assert (totals.without_baseline, totals.savings_per_hour) == (1, pytest.approx(0.0))
    assert totals.greedy_cost_per_hour == pytest.approx(2.7)


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        ("aws:eu-central-1/m6i.xlarge/spot", "aws:eu-central-1/m6i.xlarge/ondemand"),
        ("private:fra-dc1/r740-std/reserved", "private:fra-dc1/r740-std/ondemand"),
        ("azure:westeurope/Standard_D2s_v5/ondemand", "azure:westeurope/Standard_D2s_v5/ondemand"),
    ],
)
def test_ondemand_counterpart(pool: str, expected: str) -> None:
    assert ondemand_counterpart(pool) == expected


@pytest.mark.parametrize(
    ("created_h", "superseded_h", "start_h", "end_h", "hours"),
    [
        (-10, None, -5, 0, 5.0),  # current throughout the window
        (-10, -7, -8, 0, 1.0),  # replaced inside the window
        (-3, None, -5, 0, 3.0),  # created inside the window
        (-10, -9, -5, 0, 0.0),  # replaced before the window
        (1, None, -5, 0, 0.0),  # created after the window
    ],
)
def test_active_hours(created_h: float, superseded_h: float | None, start_h: float, end_h: float, hours: float) -> None:
    e = _entry(hours_ago=-created_h, superseded_at=None if superseded_h is None else T0 + timedelta(hours=superseded_h))
    assert e.active_hours(T0 + timedelta(hours=start_h), T0 + timedelta(hours=end_h)) == pytest.approx(hours)


def test_summarize_accrues_over_the_window_and_reports_the_current_run_rate() -> None:
    old = _entry("old", hours_ago=48, superseded_at=T0 - timedelta(hours=24))  # 24 h inside the window
    new = _entry("new", hours_ago=24, cost_per_hour=2.0, baseline_cost_per_hour=3.0)
    items = []
    for e in (old, new):
        no_egress = replace(PLACEMENT.result, cost_per_hour=e.cost_per_hour, egress_cost_per_hour=0.0)
        items += items_from_placement(
            LedgerEntry(e.placement_id, "t", "svc", e.created_at, e.superseded_at, e.cost_per_hour,
                        e.baseline_cost_per_hour, True),
            replace(PLACEMENT, result=no_egress),
        )  # fmt: skip
    start, end = T0 - timedelta(hours=36), T0
    totals, groups = summarize([old, new], items, group_by="provider", start=start, end=end)
    # old: 12 h in window; new: 24 h
    old_items = sum(i.cost_per_hour for i in items if i.placement_id == "old")
    new_items = sum(i.cost_per_hour for i in items if i.placement_id == "new")
    assert totals.cost == pytest.approx(old_items * 12 + new_items * 24, abs=1e-9)
    assert totals.cost_per_hour == pytest.approx(new_items, abs=1e-9)  # only "new" is current at the end
    assert totals.placements == 2
    assert sum(g.figures.cost for g in groups) == pytest.approx(totals.cost, abs=1e-9)
    costs = [g.figures.cost for g in groups]
    assert costs == sorted(costs, reverse=True)  # dearest first
    assert {g.key for g in groups} == {"aws", "gcp"}


def test_series_buckets_add_up_to_the_accrued_total() -> None:
    entries = [_entry("a", hours_ago=50), _entry("b", "other", hours_ago=30, cost_per_hour=0.5)]
    start, end = T0 - timedelta(days=3), T0
    pts = series(entries, start=start, end=end, step=timedelta(days=1))
    assert len(pts) == 3
    expected = sum(e.cost_per_hour * e.active_hours(start, end) for e in entries)
    assert sum(p.cost for p in pts) == pytest.approx(expected, abs=1e-9)
    assert pts[0].cost == pytest.approx(2.0)  # only "a", for its first 2 hours
    assert [p.start for p in pts] == [start + timedelta(days=d) for d in range(3)]


def test_totals_name_every_headline_baseline_they_mix() -> None:
    """A re-plan's headline is the placement in force, the largest requests' the home-cloud
    packer: a total adds each placement's own, so it says which and how many."""
    policies = {"a": "kubernetes-packer", "b": "kubernetes-packer", "c": "placement-in-force", "d": None}
    entries = [
        _entry(pid, baseline_policy=policy, has_baseline=policy is not None, hours_ago=5)
        for pid, policy in policies.items()
    ]
    items = [i for e in entries for i in items_from_placement(e, replace(PLACEMENT, id=e.placement_id))]
    totals, groups = summarize(entries, items, group_by="provider", start=T0 - timedelta(hours=4), end=T0)
    assert totals.baseline_policies == {"kubernetes-packer": 2, "placement-in-force": 1}
    assert totals.without_baseline == 1
    assert all(set(g.figures.baseline_policies) <= set(totals.baseline_policies) for g in groups)
