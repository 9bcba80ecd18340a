"""How long a replay will take, said before it starts (`broker simulate`): from the fleet's size,
its steps and the broker policy's solves, with constants measured on a 2-core machine
(bench/RESULTS.md, 2026-12-07). An estimate, not a promise: a loaded machine takes longer, and
the rich progress bars correct it as the run goes. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from broker.simulate.fleet import STEPS_PER_DAY, FleetIn

# a baseline policy's step: a fixed part and a part per workload (kube-default, cheapest-fit and
# karpenter-like measured within 2x of each other at 43 and 5,000 workloads)
BASELINE_STEP_S = 5e-4
BASELINE_WORKLOAD_STEP_S = 2.2e-7
# the broker policy's work between solves (re-sizing, relieving, realising answers), per workload-step
BROKER_WORKLOAD_STEP_S = 3.6e-6
# one broker solve on work limits: a fixed part and a part per workload (measured on the shipped
# fleet and at 5,000 workloads); a solve never runs past the fleet's time_limit_s
SOLVE_S = 20.0
SOLVE_WORKLOAD_S = 0.002


@dataclass(frozen=True)
class RunEstimate:
    steps: int
    workloads: int
    policies: int
    solves: int  # the broker policy's planned solves (opening, re-plans, events); 0 without it
    seconds: float  # expected at rest
    most_seconds: float  # every solve running to its time_limit_s

    def describe(self) -> str:
        what = f"{self.workloads} workloads x {self.steps} steps x {self.policies} policies"
        if self.solves:
            what += f", about {self.solves} broker solve{'s' if self.solves != 1 else ''}"
        most = f", at most about {_duration(self.most_seconds)}" if self.most_seconds > 1.5 * self.seconds else ""
        return f"{what}: expect about {_duration(self.seconds)} on 2 idle cores{most}; longer on a loaded machine"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{seconds / 60:.0f} min"


def planned_solves(fleet: FleetIn, days: float) -> int:
    """The broker policy's solves known before the run: the opening placement, one re-plan every
    `replan_hours`, and one per event that makes it re-plan (a price change, an outage and its
    recovery, a surge's start and end). Usage-driven re-sizes come on top, unknown in advance."""
    hours = days * 24
    cfg = fleet.policies.broker
    solves = 1 + math.floor(hours / cfg.replan_hours)
    ev = fleet.events
    if ev.spot_price_change is not None and ev.spot_price_change.enabled and ev.spot_price_change.at_hours < hours:
        solves += 1
    if ev.site_outage is not None and ev.site_outage.enabled and ev.site_outage.at_hours < hours:
        solves += 2
    if ev.surge is not None and ev.surge.enabled and ev.surge.day * 24 < hours:
        solves += 2
    return solves


def estimate_run(fleet: FleetIn, policies: Sequence[str], days: float) -> RunEstimate:
    steps = max(1, math.ceil(days * STEPS_PER_DAY - 1e-9))
    n = len(fleet.workloads)
    seconds = most = 0.0
    solves = 0
    for name in policies:
        if name != "broker":
            baseline = steps * (BASELINE_STEP_S + BASELINE_WORKLOAD_STEP_S * n)
            seconds, most = seconds + baseline, most + baseline
            continue
        solves = planned_solves(fleet, days)
        between = steps * BROKER_WORKLOAD_STEP_S * n
        limit = fleet.policies.broker.time_limit_s
        seconds += between + solves * min(SOLVE_S + SOLVE_WORKLOAD_S * n, limit)
        most += between + solves * limit
    return RunEstimate(steps, n, len(policies), solves, seconds, most)
