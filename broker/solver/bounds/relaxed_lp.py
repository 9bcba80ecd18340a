"""The node-share bound climbed from the prices of its own relaxation's LP.

The node-share bound (node_share.py) is the Lagrangian of the capacity rows: each pool's node
cost handed to its cpu and memory, the classes priced apart. Its best value is the LP of what
it keeps: demand, spot caps, spread and capacity, without the fit rows, the rows that make a
spread site run a node, and egress. Column generation solves that LP in far fewer rounds than
the full one, and its capacity duals are the prices the ascent looks for: alone, the smoothed
ascent stalls below that LP on big requests.

So, beside the full column generation, this runs column generation on that relaxed LP for a
share of the time and hands its duals to the node-share bound: pools in the LP are priced by their
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
from broker.solver.bounds.node_share import node_share_bound
from broker.solver.model.layout import Layout, ModelInput
from broker.solver.model.master import Master
from broker.solver.model.reduced_costs import entering, reduced_costs_at
from broker.solver.model.universe import Universe
from broker.solver.options import SolverOptions
from broker.solver.types import BestSoFar, DualPrices, EgressColumns


def relaxed_lp_bound(
    mi: ModelInput,
    lay: Layout,
    uni: Universe,
    first: IntArray,
    *,
    cg_until: float,
    until: float,
    egress: EgressColumns | None = None,
    rounds: int | None = None,
    stop: threading.Event | None = None,
    hurry: threading.Event | None = None,
    options: SolverOptions | None = None,
    so_far: BestSoFar | None = None,
) -> float:
    """The node-share bound from the relaxed LP's prices: column generation from the universe
    columns `first` until `cg_until`, the ascent (`rounds`, None: the options') and the egress
    pricing until `until` (perf_counter). Once `stop` is set (the search needs no bound any
    more) it ends early: -inf during column generation, the bound reached so far during the
    ascent. Once `hurry` is set (the search's time is up), column generation ends and the
    bound is the node-share bound at its last prices, its ascent cut short."""
    opts = options if options is not None else SolverOptions()
    hurry = hurry if hurry is not None else threading.Event()
    prices = _relaxed_prices(mi, lay, uni, first, cg_until, stop, hurry, opts)
    if stop is not None and stop.is_set():
        return -math.inf
    budget = max(until - time.perf_counter(), 0.0)
    share = opts.share_bound
    if prices is None:
        return node_share_bound(
            mi, time_budget_s=budget, egress=egress, rounds=rounds, stop=hurry, options=share, so_far=so_far
        )
    duals, start = prices
    return node_share_bound(
        mi,
        time_budget_s=budget,
        egress=egress,
        rounds=rounds,
        duals=duals,
        start=start,
        stop=hurry,
        options=share,
        so_far=so_far,
    )


def _relaxed_prices(
    mi: ModelInput,
    lay: Layout,
    uni: Universe,
    first: IntArray,
    cg_until: float,
    stop: threading.Event | None,
    hurry: threading.Event,
    opts: SolverOptions,
) -> tuple[DualPrices, FloatArray] | None:
    """The last relaxed LP's capacity prices and the split for every other pool's cost (None
    without an LP); its model and reduced-cost arrays are freed before the ascent runs. Column
    generation ends once a round lowers the LP by less than `relaxed_stalled` of it: a
    degenerate tail adds columns without moving the LP, and takes a core from the main search."""
    m = Master(mi, lay, uni, relaxed=True)
    m.add_columns(first)
    last: tuple[DualPrices, FloatArray] | None = None
    previous = math.inf
    ended = (stop,) if stop is not None else ()
    while (left := cg_until - time.perf_counter()) > 0 and not any(e.is_set() for e in (*ended, hurry)):
        lp = m.solve_lp(time_limit_s=left)
        if lp is None:
            break
        rc = reduced_costs_at(mi, uni, m, lp.row_dual, lp.value)
        start = np.full(mi.n_pools, 0.5)
        start[rc.pools.pools] = rc.pools.cpu_limits
        last = m.dual_prices(lp.row_dual), start
        if rc.converged or lp.value > (1 - opts.relaxed_stalled) * previous:
            break
        previous = lp.value
        fixed_duals = lp.row_dual[: lay.n_fixed_rows]
        m.add_columns(entering(uni, rc, fixed_duals, opts.relaxed_columns_per_class, opts.relaxed_pools_per_round))
    return last
