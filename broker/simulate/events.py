"""The scenario: when prices change, sites fail, demand surges, and which spot nodes are reclaimed.

Spot interruptions are drawn per spot pool from its monthly risk (broker/solver/answer/risk.py) by a
counter-based generator: whether the k-th oldest node of pool p is reclaimed in step s is a hash
of (seed, p, s, k). So every policy that runs k nodes of that pool at that time meets the same
draw, whatever else it did, and the same seed gives the same run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker.core.pooltable import CAPACITY_TYPES, BoolArray, FloatArray, IntArray
from broker.simulate.fleet import STEP_S, STEPS_PER_DAY, FleetIn
from broker.simulate.market import HOURS_PER_MONTH, Market

U64 = npt.NDArray[np.uint64]


@dataclass(frozen=True)
class Event:
    step: int
    kind: str  # price_change | outage_start | outage_end | surge_start | surge_end | spot_interruption
    detail: str


@dataclass(frozen=True)
class Scenario:
    steps: int
    seed: int
    hazard: FloatArray  # [pool] chance a running spot node is reclaimed within one step
    price_step: int  # -1: no price change
    price_pools: BoolArray  # [pool]
    price_factor: float
    outage_site: int  # -1: none
    outage_start: int
    outage_end: int
    surge_start: int  # -1: none
    surge_end: int
    surge_factor: float
    surge_workloads: BoolArray  # [workload]

    def timeline(self, market: Market) -> list[Event]:
        """The scheduled events (spot interruptions are drawn as the run goes)."""
        out: list[Event] = []
        if self.price_step >= 0:
            out.append(
                Event(self.price_step, "price_change", f"x{self.price_factor:g} on {int(self.price_pools.sum())} pools")
            )
        if self.outage_site >= 0:
            site = market.table.sites[self.outage_site].id
            out.append(Event(self.outage_start, "outage_start", site))
            out.append(Event(self.outage_end, "outage_end", site))
        if self.surge_start >= 0:
            n = int(self.surge_workloads.sum())
            out.append(Event(self.surge_start, "surge_start", f"x{self.surge_factor:g} on {n} workloads"))
            out.append(Event(self.surge_end, "surge_end", f"{n} workloads"))
        return sorted((e for e in out if e.step < self.steps), key=lambda e: e.step)

    def site_down(self, step: int) -> int:
        return self.outage_site if self.outage_start <= step < self.outage_end else -1

    def surge(self, step: int) -> float:
        return self.surge_factor if self.surge_start <= step < self.surge_end else 1.0

    def reclaimed(self, step: int, pools: IntArray, rank: IntArray) -> BoolArray:
        """Which of these spot nodes (pool, rank among the pool's running nodes, oldest first) are
        reclaimed in this step."""
        if len(pools) == 0:
            return np.zeros(0, dtype=bool)
        u = uniform(self.seed, pools, np.full(len(pools), step), rank)
        return np.asarray(u < self.hazard[pools], dtype=bool)


def build_scenario(fleet: FleetIn, market: Market, *, days: float) -> Scenario:
    t = market.table
    steps = round(days * STEPS_PER_DAY)
    ev = fleet.events
    step_hours = STEP_S / 3600.0
    hazard = np.zeros(t.n_pools)
    if ev.spot_interruptions.enabled:
        m = ev.spot_interruptions.risk_multiplier
        # the monthly risk as a constant hazard, scaled: P(reclaimed within a step)
        hazard = 1.0 - np.power(1.0 - np.minimum(market.risk_month, 1.0 - 1e-12), m * step_hours / HOURS_PER_MONTH)
    price_step, price_pools, price_factor = -1, np.zeros(t.n_pools, dtype=bool), 1.0
    pc = ev.spot_price_change
    if pc is not None and pc.enabled:
        site = market.site_id(pc.region, ["events", "spot_price_change", "region"])
        price_step = _step(pc.at_hours)
        price_pools = (t.site_idx == site) & (t.cap_idx == CAPACITY_TYPES.index(pc.capacity_type))
        price_factor = pc.factor
    out_site, out_start, out_end = -1, -1, -1
    o = ev.site_outage
    if o is not None and o.enabled:
        out_site = market.site_id(o.site, ["events", "site_outage", "site"])
        out_start, out_end = _step(o.at_hours), _step(o.at_hours + o.hours)
    s_start, s_end, s_factor = -1, -1, 1.0
    surge_w = np.zeros(len(fleet.workloads), dtype=bool)
    s = ev.surge
    if s is not None and s.enabled:
        s_start = s.day * STEPS_PER_DAY
        s_end = s_start + _step(s.hours)
        s_factor = s.factor
        names = set(s.workloads) if s.workloads is not None else {w.name for w in fleet.workloads}
        surge_w = np.array([w.name in names for w in fleet.workloads], dtype=bool)
    return Scenario(
        steps=steps,
        seed=fleet.seed,
        hazard=hazard,
        price_step=price_step,
        price_pools=price_pools,
        price_factor=price_factor,
        outage_site=out_site,
        outage_start=out_start,
        outage_end=out_end,
        surge_start=s_start,
        surge_end=s_end,
        surge_factor=s_factor,
        surge_workloads=surge_w,
    )


def _step(hours: float) -> int:
    return round(hours * 3600.0 / STEP_S)


def _mix(x: U64) -> U64:
    """SplitMix64's finaliser: a well-spread 64-bit hash of a 64-bit counter."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uniform(seed: int, a: IntArray, b: IntArray, c: IntArray) -> FloatArray:
    """A uniform [0, 1) number per (seed, a, b, c), the same on every machine and in every run."""
    with np.errstate(over="ignore"):
        x = _mix(np.full(len(a), np.uint64(seed & 0xFFFFFFFFFFFFFFFF)) + np.uint64(0x9E3779B97F4A7C15))
        for part in (a, b, c):
            x = _mix(x ^ (part.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)))
    return np.asarray((x >> np.uint64(11)).astype(np.float64) / float(1 << 53), dtype=np.float64)
