"""`broker simulate` says up front how long a replay should take: from the fleet's size, its
steps and the broker's planned solves (broker/simulate/estimate.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from broker.simulate.estimate import estimate_run, planned_solves
from broker.simulate.fleet import FleetIn, parse_fleet

FLEET = Path(__file__).resolve().parents[3] / "examples" / "fleet.yaml"
ALL = ["kube-default", "cheapest-fit", "karpenter-like", "broker"]


def _fleet(**change: object) -> FleetIn:
    doc = yaml.safe_load(FLEET.read_text())
    doc.update(change)
    return parse_fleet(doc)


def test_the_shipped_fleets_solves_are_the_opening_the_replans_and_its_events() -> None:
    fleet = _fleet()
    # 2 days: the opening, 4 re-plans at 12 h, the price change (30 h), the outage and its
    # recovery (40 h), the surge's start and end (day 1)
    assert planned_solves(fleet, 2.0) == 1 + 4 + 1 + 2 + 2
    assert planned_solves(fleet, 1.0) == 1 + 2  # events after the first day do not happen


def test_the_shipped_fleet_is_told_in_minutes_and_dominated_by_the_broker() -> None:
    est = estimate_run(_fleet(), ALL, 2.0)
    assert (est.steps, est.workloads, est.policies, est.solves) == (576, 43, 4, 10)
    assert 60 <= est.seconds <= 600 and est.most_seconds >= est.seconds
    baselines_only = estimate_run(_fleet(), ALL[:3], 2.0)
    assert baselines_only.solves == 0 and baselines_only.seconds < 5
    said = est.describe()
    assert said.startswith("43 workloads x 576 steps x 4 policies, about 10 broker solves: expect about ")
    assert " min on 2 idle cores" in said


def test_more_steps_or_workloads_take_longer() -> None:
    fleet = _fleet()
    assert estimate_run(fleet, ALL, 1.0).seconds < estimate_run(fleet, ALL, 2.0).seconds
    smaller = fleet.model_copy(update={"workloads": fleet.workloads[:10]})  # only its size is read
    assert estimate_run(smaller, ALL, 2.0).seconds < estimate_run(fleet, ALL, 2.0).seconds
