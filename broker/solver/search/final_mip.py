"""Phase 4 of the search: the final MIP and the lower bound for the whole catalog.

Once column generation converged, every column and pool whose reduced cost could still pay off
joins the master (reduced-cost inclusion). A placement that uses anything left out costs at
least z_LP + its reduced cost, so

    LB = max(z_LP, min(B_MIP, z_LP + min_{left out} rc))

bounds the whole catalog; only the gap target has to be proven, so what could save less than
most of it stays out. Without convergence the bound is the Lagrangian or the node-share bound,
which never needed the MIP.
"""

from __future__ import annotations

import math

import numpy as np

from broker.core.domain import BoundKind
from broker.core.pooltable import IntArray
from broker.solver.search.pattern_cuts import separate_integer
from broker.solver.search.placements import objective
from broker.solver.search.state import SearchResult, SearchState, bound_of


def final_mip(st: SearchState) -> bool:
    """The MIP over the restricted model, warm-started from the incumbent, unless the LP already
    proves the gap or the model is too big to finish its root (its cut separation then ignores
    both the time limit and the watchdog). False when the MIP proves there is no placement."""
    m, opts = st.m, st.opts
    rel_gap = opts.rel_gap
    # under work limits, not without a converged LP: it then proves nothing, and its root's work
    # has no limit but the clock
    wanted = m.n_cols <= opts.final_mip_max_cols and (opts.work_limits is None or st.converged)
    # not when the time is up: HiGHS' presolve and root ignore a limit of a few milliseconds
    in_time = st.left() >= opts.final_mip_min_s
    run_mip = st.incumbent is None or (wanted and in_time)
    if wanted and not in_time:
        st.out_of_time = True
    if st.converged and st.incumbent is not None and st.ub - st.z_lp <= rel_gap * st.ub:
        st.bound = st.z_lp  # already within the target: the LP bound holds for the whole catalog
    elif st.converged and run_mip:
        _include_by_reduced_cost(st)
    if st.bound == -math.inf and run_mip:
        runner = opts.mip_runner if m.n_cols >= opts.isolate_min_cols else None
        # a MIP answer whose pools pack onto more nodes than the model counted gets their pattern
        # cuts, and the MIP runs again (HiGHS has no cut callbacks: separate and re-solve)
        for again in range(opts.pattern_cut_mip_rounds + 1):
            res = m.solve_mip(
                time_limit_s=st.seconds(opts.final_mip_share),
                seed=st.seed,
                hint=st.hint(m),
                rel_gap=rel_gap,
                runner=runner,
                max_nodes=st.mip_nodes,
            )
            if res.status == "infeasible" and st.incumbent is None:
                return False
            if res.status in ("optimal", "feasible"):
                xm = m.placement(res.x)
                if st.incumbent is None or objective(st.mi, st.lay, xm) < st.ub - 1e-9:
                    st.incumbent, st.ub = xm, objective(st.mi, st.lay, xm)
            st.status = res.status
            if res.status in ("optimal", "feasible", "unknown") and math.isfinite(res.bound):
                st.bound = max(st.bound, res.bound)  # a model with more valid cuts bounds no lower
            stop = res.status not in ("optimal", "feasible") or st.left() < opts.final_mip_min_s
            if stop or again == opts.pattern_cut_mip_rounds or separate_integer(st, m.placement(res.x)) == 0:
                break
        if not math.isfinite(st.bound):
            st.bound = st.z_lp
    return True


def _include_by_reduced_cost(st: SearchState) -> None:
    """Every column and pool that could still pay off joins the master (the most promising first,
    up to `include_cols`: a MIP over hundreds of thousands of columns does not even finish its
    root); the least reduced cost of what stays out goes to `excluded_min`."""
    m, uni, opts = st.m, st.uni, st.opts
    rc_x, rc_pools, rc_p = st.rc_x, st.rc_pools, st.rc_p
    cap = opts.include_cols
    room = st.ub - st.z_lp - 0.9 * opts.rel_gap * st.ub
    extra = ~m.in_model[rc_x.idx] & (rc_x.val < room)
    extra_cols = rc_x.idx[extra][np.argsort(rc_x.val[extra], kind="stable")[:cap]]
    pool_out = m.pool_col[rc_pools] < 0
    pays = pool_out & (rc_p < room)
    order = np.flatnonzero(pays)[np.argsort(rc_p[pays], kind="stable")]
    new_pools = np.zeros(len(rc_pools), dtype=bool)
    added = 0
    grow: list[IntArray] = [extra_cols]
    for i in order:
        on_pool = uni.pool_columns(int(rc_pools[i]))
        if added + len(on_pool) > cap:
            break
        new_pools[i] = True
        added += len(on_pool)
        grow.append(on_pool.astype(np.int64))  # every column of an included pool
    left_pools = pool_out & ~new_pools
    if left_pools.any():
        st.excluded_min = min(st.excluded_min, float(rc_p[left_pools].min()))
    m.add_columns(np.concatenate(grow))
    rest_cols = ~m.in_model[rc_x.idx]
    if rest_cols.any():
        st.excluded_min = min(st.excluded_min, float(rc_x.val[rest_cols].min()))


def result(st: SearchState) -> SearchResult | None:
    """The incumbent and the best bound proven for it (None without an incumbent)."""
    if st.incumbent is None:
        return None
    x = st.incumbent
    value = objective(st.mi, st.lay, x)
    fallback = -math.inf
    if st.share_bound is not None and not st.converged:
        fallback = bound_of(st.share_bound, st.share_so_far, st.left() + st.opts.bound_wait_s, st.hurry)
    if st.converged:
        lower = max(st.z_lp, min(st.bound, st.z_lp + st.excluded_min))
        kind = BoundKind.MIP if lower > st.z_lp else BoundKind.LP
    else:
        lower, kind = max(
            (st.lagrangian, BoundKind.LAGRANGIAN),
            (fallback, BoundKind.NODE_SHARE),
            (st.loose_bound, BoundKind.LOOSE_LP),
            (st.priced_out, BoundKind.LP),  # before cuts that restarted column generation
        )
    # HiGHS' dual bound carries solver tolerances; never claim more than is proven
    lower = min(lower * (1 - 1e-9), value)
    return SearchResult(
        status=st.status,
        x=x,
        objective=value,
        lower_bound=lower,
        proven=st.converged or kind == BoundKind.LP,
        pools_considered=len(st.m.pools),
        lp_rounds=st.rounds,
        out_of_time=st.out_of_time,
        bound_kind=kind.value,
    )
