"""Phase 2 of the search: the first incumbent, and the small MIPs that improve it.

The first incumbent is the best feasible start (the baselines' placements, and on requests with
dependencies the cheapest of them with its dependency components co-located) or the LP rounded,
whichever costs less; the rounded LP's broken classes take the start's placement first. Every
later phase improves it with `improve`: a small MIP over a set of columns, warm-started from it.
"""

from __future__ import annotations

import math
import time

import numpy as np

from broker.core.pooltable import BoolArray, IntArray
from broker.solver.model.layout import make_layout
from broker.solver.model.master import Master
from broker.solver.model.universe import make_universe
from broker.solver.search.co_location import co_located
from broker.solver.search.placements import class_nodes, columns_of, feasible, objective, repaired, routed_egress
from broker.solver.search.state import SearchState
from broker.solver.types import ClassPlacement


def first_incumbent(st: SearchState, starts: list[ClassPlacement]) -> None:
    """The cheapest feasible start, or the LP rounded (and repaired) when it costs less, then
    with its dependency components co-located when that costs less still; its columns join the
    master."""
    mi, lay = st.mi, st.lay
    ok = [x0 for x0 in starts if feasible(mi, x0, class_nodes(mi, x0))]
    st.incumbent = min(ok, key=lambda xx: objective(mi, lay, xx)) if ok else None
    st.ub = objective(mi, lay, st.incumbent) if st.incumbent is not None else math.inf
    if st.lp_x is not None and st.incumbent is not None:
        st.lp_x = repaired(mi, st.lp_x, st.incumbent)
    lp_x = st.lp_x
    if lp_x is not None and feasible(mi, lp_x, class_nodes(mi, lp_x)) and (v := objective(mi, lay, lp_x)) < st.ub:
        st.incumbent, st.ub = lp_x, v
        if _worth_co_locating(st, lp_x, v):
            # the LP splits a service's and its callers' replicas where each is cheapest too
            y = co_located(mi, lp_x, until=st.until(st.opts.co_location_share))
            if feasible(mi, y, class_nodes(mi, y)) and (w := objective(mi, lay, y)) < st.ub - 1e-9:
                st.incumbent, st.ub = y, w
    st.m.add_columns(columns_of(st.incumbent, st.uni.cols))


def co_located_start(st: SearchState, starts: list[ClassPlacement]) -> list[ClassPlacement]:
    """The cheapest feasible start with its dependency components co-located (co_location.py),
    as one more start, when it is feasible and cheaper (its columns join the master); else none.
    The baselines place a service and its callers independently, so their traffic crosses sites
    until the search finds a co-location, which at big requests it has no time for."""
    mi, lay = st.mi, st.lay
    if st.opts.co_location_share <= 0 or not any(cl.deps for cl in mi.classes):
        return []  # before the starts' costs, which take a while on big requests
    ok = [(objective(mi, lay, x0), i) for i, x0 in enumerate(starts) if feasible(mi, x0, class_nodes(mi, x0))]
    if not ok:
        return []
    value, i = min(ok)
    if not _worth_co_locating(st, starts[i], value):
        return []
    opts = st.opts
    share = opts.co_location_share_big if st.uni.size > opts.relaxed_min_cols else opts.co_location_share
    x = co_located(mi, starts[i], until=st.until(share))
    if not feasible(mi, x, class_nodes(mi, x)) or objective(mi, lay, x) >= value - 1e-9:
        return []
    st.m.add_columns(columns_of(x, st.uni.cols))
    return [x]


def _worth_co_locating(st: SearchState, x: ClassPlacement, value: float) -> bool:
    """Whether x pays enough egress for co-location to be tried: where egress is a small share of
    the cost, moving components mostly trades node sharing for little, and the model's aggregate
    capacity rule can call a placement cheaper that packs onto more nodes."""
    opts = st.opts
    return (
        opts.co_location_share > 0
        and any(cl.deps for cl in st.mi.classes)
        and routed_egress(st.mi, x) >= opts.co_location_min_egress_share * value
    )


def improve(
    st: SearchState, cols: IntArray, seconds: float, free: BoolArray | None = None, until: float = math.inf
) -> bool:
    """A small MIP over `cols` and the incumbent's columns, warm-started; keeps a better answer.
    With `free`, the other classes keep their replicas. True when the MIP was solved. A runner's
    grace comes out of `seconds`, and the MIP ends by `until` (model building included)."""
    mi, lay, uni, opts = st.mi, st.lay, st.uni, st.opts
    if opts.work_limits is not None:  # every improving MIP ends by its nodes: the time only guards
        seconds = st.left()
    if min(seconds, until - time.perf_counter()) < opts.improve_min_s:
        st.out_of_time = True
        return False
    if st.incumbent is None:
        sub = Master(mi, lay, uni)
        sub.add_columns(cols)
    else:
        # a model of its own over just these columns: its spread and egress rows cover only
        # the sites offered, a fraction of the whole layout's
        offer = np.concatenate([cols, columns_of(st.incumbent, uni.cols)])
        sub_mi = mi.restricted(uni.cols.cls(offer), uni.cols.pool[offer])
        sub_lay = make_layout(sub_mi)
        sub_uni = make_universe(sub_mi, sub_lay)
        sub = Master(sub_mi, sub_lay, sub_uni)
        sub.add_columns(np.arange(sub_uni.size))
        if free is not None:
            sub.hold(free, st.incumbent)
    runner = opts.mip_runner if sub.n_cols >= opts.isolate_min_cols else None
    seconds = min(seconds, until - time.perf_counter()) - (runner.grace_s if runner is not None else 0.0)
    if seconds < opts.improve_min_s:  # HiGHS would run far past so short a limit
        st.out_of_time = True
        return False
    rs = sub.solve_mip(
        time_limit_s=seconds,
        seed=st.seed,
        hint=st.hint(sub),
        rel_gap=opts.rel_gap / 4,
        runner=runner,
        max_nodes=st.mip_nodes,
    )
    if rs.status in ("optimal", "feasible"):
        st.offer(sub.placement(rs.x))
    return rs.status == "optimal"
