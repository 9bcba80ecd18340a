"""How long the solver may run on one placement request (docs/operations.md, "Time a placement gets").

The request's `time_limit_s` when it sets one, else a default that grows with the request's
size; then capped by how the request runs: a synchronous answer must come back before the
HTTP request times out, a job may run much longer. The caps and the default's curve are
settings, read once at the edge (`TimeCaps.of(settings)`) and passed down.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.settings import Settings


@dataclass(frozen=True)
class TimeCaps:
    """The caps on a solve's time limit, by how the request runs, and the default budget's curve."""

    sync_s: float
    async_s: float
    default_points: tuple[tuple[int, float], ...]

    @classmethod
    def of(cls, settings: Settings) -> TimeCaps:
        legacy = settings.solve_time_limit_s  # the old single cap still caps both when set
        sync_s, async_s = settings.sync_time_limit_s, settings.async_time_limit_s
        if legacy is not None:
            sync_s, async_s = min(sync_s, legacy), min(async_s, legacy)
        return cls(sync_s, async_s, tuple((int(n), float(s)) for n, s in settings.default_time_budget))


@dataclass(frozen=True)
class TimeBudget:
    """The time limit a solve gets, and where it came from."""

    seconds: float  # what the solver is given
    asked_s: float | None  # the request's time_limit_s; None: the default for its size applied
    default_s: float  # the default budget for the request's size
    cap_s: float
    synchronous: bool

    @property
    def capped(self) -> bool:
        return self.seconds < self.wanted_s

    @property
    def wanted_s(self) -> float:
        return self.asked_s if self.asked_s is not None else self.default_s

    def warning(self, async_cap_s: float) -> str | None:
        """What the answer says when the cap cut the time (None when it did not)."""
        if not self.capped:
            return None
        what = (
            f"time_limit_s {self.asked_s:g} s was asked"
            if self.asked_s is not None
            else f"the default time budget for this request's size is {self.default_s:.0f} s"
        )
        if self.synchronous:
            hint = f'; send "async": true for up to {async_cap_s:g} s' if async_cap_s > self.cap_s else ""
            return (
                f"time limit capped: {what}, synchronous placements get at most {self.cap_s:g} s "
                f"(BROKER_SYNC_TIME_LIMIT_S), so it was solved with {self.seconds:g} s{hint}"
            )
        return (
            f"time limit capped: {what}, asynchronous placements get at most {self.cap_s:g} s "
            f"(BROKER_ASYNC_TIME_LIMIT_S), so it was solved with {self.seconds:g} s"
        )


def default_time_limit_s(workloads: int, points: Sequence[tuple[int, float]]) -> float:
    """The default budget for a request of `workloads` workloads: the points interpolated on
    log-log axes (solve time to a given gap grows about like a power of the size), the first
    point's seconds below it, the last segment's power above the last point."""
    n = max(1, workloads)
    if n <= points[0][0] or len(points) == 1:
        return float(points[0][1])
    for (n0, s0), (n1, s1) in itertools.pairwise(points):
        if n <= n1:
            return _power(n, n0, s0, n1, s1)
    (n0, s0), (n1, s1) = points[-2], points[-1]
    return _power(n, n0, s0, n1, s1)


def _power(n: int, n0: int, s0: float, n1: int, s1: float) -> float:
    slope = math.log(s1 / s0) / math.log(n1 / n0)
    return float(s0 * (n / n0) ** slope)


def time_budget(asked_s: float | None, workloads: int, caps: TimeCaps, *, synchronous: bool) -> TimeBudget:
    """The time limit of one solve: the asked or default budget, capped by how the request runs."""
    default_s = round(default_time_limit_s(workloads, caps.default_points), 1)
    cap_s = caps.sync_s if synchronous else caps.async_s
    wanted = asked_s if asked_s is not None else default_s
    return TimeBudget(
        seconds=min(wanted, cap_s), asked_s=asked_s, default_s=default_s, cap_s=cap_s, synchronous=synchronous
    )


CLOCK_WARNING_PREFIX = "clock-dependent answer"


def clock_warning(*, status: str, stop_reason: str | None, gap_pct: float, reproducible: bool) -> str | None:
    """What an answer says when it depends on the clock (None when it does not): a search that ended
    on its time, not on a proof of optimality, may end elsewhere on another run or machine, so the
    same request (a CI gate's) can get another placement and cost. A reproducible request ends on
    work limits instead (its own warning says when the clock still cut it short)."""
    if reproducible or status == "optimal" or stop_reason is None or stop_reason == "infeasible":
        return None
    return (
        f"{CLOCK_WARNING_PREFIX}: the search stopped ({stop_reason}, {gap_pct:.2f}% gap) without proving "
        "this placement optimal and its solves end on the clock, so the same request may get another "
        'placement and cost on another run; send "reproducible": true (broker place --reproducible) '
        "for one that ends on work limits, the same on any machine"
    )
