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


def test_the_shipped_fleets_solves_are_the_opening_and_the_replans() -> None:
    fleet = _fleet()
    # 2 days: the opening and a re-plan every 12 h (measured: 5 solves, bench/RESULTS.md 2026-12-07)
    assert planned_solves(fleet, 2.0) == 1 + 4
    assert planned_solves(fleet, 0.25) == 1


def test_the_shipped_fleet_is_told_in_minutes_and_dominated_by_the_broker() -> None:
    est = estimate_run(_fleet(), ALL, 2.0)
    assert (est.steps, est.workloads, est.policies, est.solves) == (576, 43, 4, 5)
    # measured idle-equivalent: ~95 s of CPU for the broker policy, about 1 s for the three baselines
    assert 60 <= est.seconds <= 180
    # every solve at the fleet's 60 s limit, and one more per event (price change, outage, surge)
    assert est.most_seconds >= (5 + 5) * 60
    baselines_only = estimate_run(_fleet(), ALL[:3], 2.0)
    assert baselines_only.solves == 0 and baselines_only.seconds < 5
    said = est.describe()
    assert said.startswith("43 workloads x 576 steps x 4 policies, about 5 broker solves: expect about ")
    assert "at this machine's load" not in said and "at most about 10 min" in said
    loaded = est.describe(slowdown=3.0)  # load 5 on 2 cores
    assert f"at this machine's load ({round(est.seconds)} s idle)" in loaded


def test_more_steps_or_workloads_take_longer() -> None:
    fleet = _fleet()
    assert estimate_run(fleet, ALL, 1.0).seconds < estimate_run(fleet, ALL, 2.0).seconds
    smaller = fleet.model_copy(update={"workloads": fleet.workloads[:10]})  # only its size is read
    assert estimate_run(smaller, ALL, 2.0).seconds < estimate_run(fleet, ALL, 2.0).seconds
