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
# the broker policy: once per run (its forecast model trained on the history), its work between
# solves per workload-step (re-sizing, relieving, realising answers), and one solve on work limits
# (a fixed part and a part per workload), never longer than the fleet's time_limit_s
BROKER_ONCE_S = 25.0
BROKER_WORKLOAD_STEP_S = 3.6e-6
SOLVE_S = 12.0
SOLVE_WORKLOAD_S = 0.002


@dataclass(frozen=True)
class RunEstimate:
    steps: int
    workloads: int
    policies: int
    solves: int  # the broker policy's re-plan solves (opening and timer); 0 without it
    seconds: float  # expected on an idle machine
    most_seconds: float  # every solve running to its time_limit_s, and one more per event

    def describe(self, slowdown: float = 1.0) -> str:
        """`slowdown`: how much slower than idle the machine runs now (its load, from the caller)."""
        what = f"{self.workloads} workloads x {self.steps} steps x {self.policies} policies"
        if self.solves:
            what += f", about {self.solves} broker solve{'s' if self.solves != 1 else ''}"
        if slowdown > 1.2:
            expect = (
                f"about {_duration(self.seconds * slowdown)} at this machine's load ({_duration(self.seconds)} idle)"
            )
        else:
            expect = f"about {_duration(self.seconds)}"
        most = self.most_seconds * max(slowdown, 1.0)
        if most > 1.5 * self.seconds * max(slowdown, 1.0):
            expect += f", at most about {_duration(most)}"
        return f"{what}: expect {expect}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{seconds / 60:.0f} min"


def planned_solves(fleet: FleetIn, days: float) -> int:
    """The broker policy's solves known before the run: the opening placement and one re-plan every
    `replan_hours` (a re-plan on an event resets that clock, so events add few)."""
    return 1 + math.floor(days * 24 / fleet.policies.broker.replan_hours + 1e-9)


def _events(fleet: FleetIn, days: float) -> int:
    """Events that may make the broker re-plan: a price change, an outage and its recovery, a surge's
    start and end (each counted once more in the "at most" figure)."""
    hours, ev = days * 24, fleet.events
    n = 0
    if ev.spot_price_change is not None and ev.spot_price_change.enabled and ev.spot_price_change.at_hours < hours:
        n += 1
    if ev.site_outage is not None and ev.site_outage.enabled and ev.site_outage.at_hours < hours:
        n += 2
    if ev.surge is not None and ev.surge.enabled and ev.surge.day * 24 < hours:
        n += 2
    return n


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
        rest = BROKER_ONCE_S + steps * BROKER_WORKLOAD_STEP_S * n
        limit = fleet.policies.broker.time_limit_s
        seconds += rest + solves * min(SOLVE_S + SOLVE_WORKLOAD_S * n, limit)
        most += rest + (solves + _events(fleet, days)) * limit
    return RunEstimate(steps, n, len(policies), solves, seconds, most)
