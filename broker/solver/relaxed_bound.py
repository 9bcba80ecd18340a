"""The share bound climbed from the prices of its own relaxation's LP.

The share bound (share_bound.py) is the Lagrangian of the capacity rows: each pool's node
cost handed to its cpu and memory, the classes priced apart. Its best value is the LP of what
it keeps: demand, spot caps, spread and capacity, without the fit rows, the rows that make a
spread site run a node, and egress. Column generation solves that LP far faster than the full
one (3,000 workloads: converged in 7 rounds, 14 s alone, where the full LP still moved after 40
rounds), and its capacity duals are the prices the ascent looks for: alone, the smoothed ascent
stalled 3 $/h below that LP at 3,000 workloads (1,322.1 vs 1,325.1 $/h before egress).

So, beside the full column generation, this runs column generation on that relaxed LP for a
share of the time and hands its duals to the share bound: pools in the LP are priced by their
capacity rows' duals (scaled to their node cost), every other pool's cost is split wholly onto
the resource that limits what a node earns at those duals (`PoolCosts.cpu_limits`: a split
under which none of its columns has a negative reduced cost), and the ascent climbs from there.
Every price is a valid multiplier, so the bound holds whether column generation finished or not.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.master import Master
from broker.solver.model import Layout, ModelInput
from broker.solver.pricing import entering, price
from broker.solver.share_bound import ROUNDS, DualPrices, EgressColumns, simple_bound
from broker.solver.universe import Universe

# columns per class and new pools per round: 8 and 100 (the full CG's) converged in 22 rounds at
# 3,000 workloads (31 s alone), 30 and 300 in 10 (16 s), 100 and 1,000 in 7 (14 s)
PER_CLASS, POOLS_PER_ROUND = 100, 1000
# it ends when a round lowers the LP by less than this share: at 3,000 workloads three more rounds
# at 1,325.1412 $/h (columns priced negative, the LP unmoved) took a core for 5 s beside the main
# column generation and its MIPs; the bound they gave was 0.01 $/h higher
STALLED = 1e-6


def relaxed_bound(
    mi: ModelInput,
    lay: Layout,
    uni: Universe,
    first: IntArray,
    *,
    cg_until: float,
    until: float,
    egress: EgressColumns | None = None,
    rounds: int = ROUNDS,
    stop: threading.Event | None = None,
) -> float:
    """The share bound from the relaxed LP's prices: column generation from the universe columns
    `first` until `cg_until`, the ascent (`rounds`) and the egress pricing until `until`
    (perf_counter). Once `stop` is set (the search needs no bound any more) it ends early: -inf
    during column generation, the bound reached so far during the ascent."""
    prices = _relaxed_prices(mi, lay, uni, first, cg_until, stop)
    if stop is not None and stop.is_set():
        return -math.inf
    budget = max(until - time.perf_counter(), 0.0)
    if prices is None:
        return simple_bound(mi, time_budget_s=budget, egress=egress, rounds=rounds, stop=stop)
    duals, start = prices
    return simple_bound(mi, time_budget_s=budget, egress=egress, rounds=rounds, duals=duals, start=start, stop=stop)


def _relaxed_prices(
    mi: ModelInput, lay: Layout, uni: Universe, first: IntArray, cg_until: float, stop: threading.Event | None
) -> tuple[DualPrices, FloatArray] | None:
    """The last relaxed LP's capacity prices and the split for every other pool's cost (None
    without an LP); its model and pricing arrays are freed before the ascent runs."""
    m = Master(mi, lay, uni, relaxed=True)
    m.add_columns(first)
    last: tuple[DualPrices, FloatArray] | None = None
    previous = math.inf
    while (left := cg_until - time.perf_counter()) > 0 and not (stop is not None and stop.is_set()):
        lp = m.solve_lp(time_limit_s=left)
        if lp is None:
            break
        priced = price(mi, uni, m, lp.row_dual, lp.value)
        start = np.full(mi.n_pools, 0.5)
        start[priced.pools.pools] = priced.pools.cpu_limits
        last = m.dual_prices(lp.row_dual), start
        if priced.converged or lp.value > (1 - STALLED) * previous:
            break
        previous = lp.value
        m.add_columns(entering(uni, priced, lp.row_dual[: lay.n_fixed_rows], PER_CLASS, POOLS_PER_ROUND))
    return last
