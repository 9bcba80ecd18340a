"""Phase 1 of the search: column generation on the LP over the whole catalog.

The restricted master starts from a small set of columns (`initial_columns`), and each round
prices every candidate (class, pool) column and pool with the LP's duals (reduced_costs.py) and
adds those that could lower the LP, until none can: the LP's value is then the full catalog's LP,
a lower bound. When the time does not allow that, the round's duals still give the Lagrangian
bound (bounds/lagrangian.py), and the node-share bound runs in a thread (bounds/).
"""

from __future__ import annotations

import time

import numpy as np

from broker.core.pooltable import IntArray
from broker.solver.bounds.lagrangian import lagrangian_bound
from broker.solver.bounds.node_share import node_share_bound
from broker.solver.bounds.relaxed_lp import relaxed_lp_bound
from broker.solver.model.layout import ModelInput, make_layout
from broker.solver.model.master import Master
from broker.solver.model.reduced_costs import entering, reduced_costs_at, shortlist
from broker.solver.model.universe import Universe, make_universe
from broker.solver.options import SolverOptions
from broker.solver.prepare.classes import per_node_exact
from broker.solver.search.pattern_cuts import separate
from broker.solver.search.placements import columns_of, round_lp
from broker.solver.search.state import SearchState, in_thread
from broker.solver.segments import cheapest_per_site, group_bounds
from broker.solver.types import ClassPlacement, EgressColumns


def start(
    mi: ModelInput, starts: list[ClassPlacement], *, time_limit_s: float, seed: int, opts: SolverOptions, prove: bool
) -> SearchState:
    """The universe, the restricted master over the first columns, and (on big requests) the
    relaxed LP's bound started in a thread beside column generation."""
    started = time.perf_counter()
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    if uni.size > opts.loose_fit_min_cols and opts.mip_runner is not None:
        opts.mip_runner.prestart()  # its MIPs will be big: ready by the time CG ends
    # on big requests column generation starts with fit rows not capped at the class's replicas
    # and caps them once that LP converges (Master.tighten): the capped rows make every LP slower
    loose = opts.loose_fit_min_cols < uni.size <= opts.loose_fit_max_cols
    m = Master(mi, lay, uni, loose_fit=loose, eager_fit=uni.size <= opts.eager_fit_max_cols)
    first = [initial_columns(mi, uni)] + [columns_of(x0, uni.cols) for x0 in starts]
    if len(lay.keep_key):  # where replicas run now stays on the table
        pos = uni.cols.position(mi.keep_class, mi.keep_pool)
        first.append(pos[pos >= 0])
    st = SearchState(mi, lay, uni, m, opts, seed, prove, started, time_limit_s, np.concatenate(first))
    m.add_columns(st.first, with_fit_rows=True)
    if prove and opts.relaxed_min_cols < uni.size <= opts.loose_fit_max_cols:
        # column generation cannot converge here in time: the node-share bound, priced by its own
        # relaxation's LP, starts at once in a thread beside it
        st.share_bound = in_thread(
            "relaxed-bound", relaxed_lp_bound, mi, lay, uni, st.first, egress=EgressColumns.of(lay),
            cg_until=started + opts.relaxed_cg_end * time_limit_s, until=started + opts.relaxed_end * time_limit_s,
            stop=st.no_bound_needed, hurry=st.hurry, options=opts, so_far=st.share_so_far,
        )  # fmt: skip
    return st


def column_generation(st: SearchState) -> None:
    """Rounds of reduced costs until the LP converges or its next round would eat into the MIPs' time;
    then the LP's caps go in (if still loose), and what the MIPs read is kept."""
    mi, uni, m, opts, lay = st.mi, st.uni, st.m, st.opts, st.lay
    limit = st.time_limit_s
    pricing_s = 0.0  # what the last round's reduced costs took: the LP must leave time for them
    values: list[float] = []  # the LP's value per round of this phase (loose fit rows, then tight)
    work = opts.work_limits
    cut_rounds = 0
    for rounds in range(1, opts.max_cg_rounds + 1):
        st.rounds = rounds
        round_start = time.perf_counter()
        # a round's LP can take seconds on big requests: never past the request's time (after
        # the first, a round must end before the MIPs' share, less a margin: one cut off is time lost)
        # (under work limits the time only guards: a round cut off by it would not repeat)
        reserve = (0.1 if rounds == 1 else opts.cg_end - 0.05) * limit + opts.pricing_margin * pricing_s
        lp = m.solve_lp(time_limit_s=st.left() - (0.0 if work else reserve))
        if lp is None:
            break
        st.z_lp = lp.value
        st.lp_x = round_lp(mi, *m.x_keys(), lp.x)
        st.lp_support = m.x_uni[lp.x > 1e-7]
        priced = time.perf_counter()
        st.reduced = rc = reduced_costs_at(mi, uni, m, lp.row_dual, st.z_lp)
        pricing_s = time.perf_counter() - priced
        st.rc_x, st.rc_pools, st.rc_p = rc.cols, rc.pools.pools, rc.pools.val
        if rc.converged:
            if m.loose_fit:
                st.loose_bound = st.z_lp
                m.tighten()
                values.clear()
                continue
            st.priced_out = max(st.priced_out, st.z_lp)
            if cut_rounds < opts.pattern_cut_rounds and separate(st, lp, until=st.until(1 - opts.cg_end)) > 0:
                cut_rounds += 1
                continue
            st.converged = True
            break
        # CG rounds are cheap (the basis is kept); the Lagrangian bound reads the whole universe,
        # so it is computed once, from the last duals, when CG must stop early, and only when it
        # fits the request's time at all
        lag_s = opts.bound_seconds_per_col * uni.size
        lag_ok = st.prove and 1.5 * lag_s < 0.5 * limit
        # stop when the next round, three times as long as this one (LPs grow), would end in the
        # MIPs' share of the time: an LP cut off by its limit is time lost, and a bigger LP
        # support makes the RENS MIP's cut separation overrun its limit
        round_s = time.perf_counter() - round_start
        values.append(st.z_lp)
        out_of_rounds = work is not None and rounds >= work.cg_rounds
        time_up = st.left() < limit * opts.cg_end + (1.5 * lag_s if lag_ok else 0.0) + 3.0 * round_s
        if out_of_rounds or time_up or _stalled(values, st):
            st.out_of_time |= work is not None and time_up and not out_of_rounds
            if lag_ok:
                st.lagrangian = lagrangian_bound(mi, uni, m, lp.row_dual)
            break
        fixed_duals = lp.row_dual[: lay.n_fixed_rows]
        m.add_columns(entering(uni, rc, fixed_duals, opts.cg_columns_per_class, opts.cg_pools_per_round))

    if st.converged:  # the LP is the bound
        st.no_bound_needed.set()
        st.hurry.set()
    if m.loose_fit:
        # stopped before the loose phase converged: the capped rows go in for the MIPs, and the
        # loose LP's support guides RENS. The LP is not re-solved with them: from the loose basis
        # that takes many times a loose round, and it rarely finished in the time left for it
        m.tighten()
    st.lp_pool = np.zeros(mi.n_pools, dtype=bool)
    st.lp_pool[uni.cols.pool[st.lp_support]] = True
    if not st.converged or m.n_cols > opts.final_mip_max_cols:
        # no reduced-cost inclusion follows: keep only the columns of least reduced cost the MIPs below read
        on_lp = st.lp_pool[uni.cols.pool[st.rc_x.idx]]
        st.rc_x = shortlist(uni.cols, st.rc_x, opts.lns_max_offered_columns, on_lp, opts.second_best)
        st.reduced = None


def _stalled(values: list[float], st: SearchState) -> bool:
    """The LP's value moved by less than cg_stall_rel over the last cg_stall_rounds rounds, and
    CG has had cg_stall_after of the time, or half its rounds under work limits (before, it may
    still converge and prove its LP)."""
    opts = st.opts
    k = opts.cg_stall_rounds
    # under work limits: once half the rounds are gone, not by the clock
    if opts.work_limits is not None:
        early = len(values) < opts.work_limits.cg_rounds // 2
    else:
        early = st.left() > (1 - opts.cg_stall_after) * st.time_limit_s
    if k <= 0 or len(values) <= k or early:
        return False
    return values[-k - 1] - values[-1] <= opts.cg_stall_rel * abs(values[-1])


def start_share_bound(st: SearchState) -> None:
    """The LP-free node-share bound in a thread beside the MIPs, which mostly wait on their child
    process or on HiGHS, either way without the GIL: its ascent gains with time. Not when the
    Lagrangian bound is already next to the LP, which no other bound can pass."""
    opts = st.opts
    near_lp = max(st.lagrangian, st.loose_bound) >= (1 - opts.rel_gap / 2) * st.z_lp
    if st.prove and st.share_bound is None and not st.converged and not near_lp:
        st.share_bound = in_thread(
            "share-bound", node_share_bound, st.mi, time_budget_s=opts.share_bound_share * st.left(),
            egress=EgressColumns.of(st.lay), options=opts.share_bound, stop=st.hurry,
            so_far=st.share_so_far,
        )  # fmt: skip


def initial_columns(mi: ModelInput, u: Universe, *, per_class: int = 4, sites_extra: int = 2) -> IntArray:
    """A small start: each class's cheapest pools (whole nodes alone, and divisible nodes),
    its cheapest pool at a few more sites when it must spread, and owned pools. Per class with
    scalar demands (ModelInput.fit gathers them per column, far slower on big requests), what
    only the candidate set and demand decide computed once for the classes that share them, one
    group at a time."""
    chosen: list[IntArray] = []
    first = np.r_[0, np.cumsum([len(c.cand) for c in mi.classes])]
    finite = np.isfinite(mi.max_nodes)
    groups: dict[tuple[int, tuple[float, ...]], list[int]] = {}
    for i, c in enumerate(mi.classes):
        groups.setdefault((id(c.cand), tuple(c.demand.tolist())), []).append(i)
    for members in groups.values():
        cand = mi.classes[members[0]].cand
        cost = mi.node_cost[cand]
        cpu, mem, gpu = mi.classes[members[0]].demand
        vc, me = mi.vcpus[cand], mi.mem[cand]
        fit = np.floor(per_node_exact(cpu, mem, gpu, vc, me, mi.gpus[cand]) + 1e-9)
        with np.errstate(divide="ignore"):
            share = cost * np.maximum(cpu / vc, mem / me)
        owned = np.flatnonzero(finite[cand])[:20]
        k = min(per_class, len(cand))
        by_site = bounds = np.zeros(0, dtype=np.int64)
        if any(mi.classes[i].min_sites > 1 for i in members):
            by_site = np.argsort(mi.site_idx[cand], kind="stable")
            bounds = group_bounds(mi.site_idx[cand[by_site]])
        for i in members:
            c = mi.classes[i]
            whole = cost / np.maximum(np.minimum(fit, c.replicas), 1.0) + c.rep_cost
            chosen.append(first[i] + np.argpartition(whole, k - 1)[:k])
            chosen.append(first[i] + np.argpartition(share + c.rep_cost, k - 1)[:k])
            if c.min_sites > 1:  # each site's cheapest pool, the sites ordered by it
                order, best = cheapest_per_site(whole, by_site, bounds)
                chosen.append(first[i] + best[order][: c.min_sites + sites_extra])
            chosen.append(first[i] + owned)
    return np.unique(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)
