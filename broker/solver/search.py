"""Finding the placement and proving its quality over the whole catalog.

1. Start from a small pool set (each class's cheapest pools at its cheapest sites).
2. Column generation on the LP: price every candidate pool with the duals
   (pricing.py) and add those that could lower the LP, until none can.
3. An incumbent: the LP solution rounded (or the greedy one, if better).
4. Reduced-cost inclusion: every pool with z_LP + rc_p < incumbent joins
   the restricted MIP (up to a cap). Any placement that uses a pool left out
   costs at least z_LP + rc_p, so
       LB = min(B_restricted, z_LP + min_{p excluded} rc_p)
   is a lower bound for the whole catalog; when nothing that could pay off
   was left out it is just the MIP's own dual bound.
5. The MIP over that set, warm-started from the incumbent, until the gap
   target or the time limit.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver import costs, mip_process
from broker.solver.baseline import cheapest_per_site, group_bounds
from broker.solver.bound import lagrangian_bound
from broker.solver.classes import per_node_exact
from broker.solver.lns import columns_on_pools, pick_classes
from broker.solver.master import Master
from broker.solver.model import Layout, ModelInput, XColumns, egress_values, make_layout
from broker.solver.pricing import ColumnCosts, Priced, best_per_class, entering, price, shortlist
from broker.solver.relaxed_bound import relaxed_bound
from broker.solver.share_bound import EgressColumns, simple_bound
from broker.solver.universe import Universe, make_universe

ClassPlacement = dict[tuple[int, int], int]  # (class index, pool index) -> replicas
# what the Lagrangian bound costs per universe column (measured: 1.5-2 s at 2.2 M columns)
BOUND_SECONDS_PER_COL = 1.0e-6
# above this size the second neighbourhood offers each class its best-priced column on the LP's
# pools (2 if the LP splits it: SECOND_BIG_*), not its 5 best (15k columns at 3,000 workloads: 26 s
# for an 8 s limit; with 1, 6.4k columns, solved in 4.1 s: 1,350.5 -> 1,341.9 $/h), and RENS and
# it get more of the time
NEIGHBOURHOOD_MAX_COLS = 5_000_000
# universe columns between which CG starts with loose fit rows (the CI-sized request has 69k, 300
# workloads 2.15 M, 3,000 14.7 M). Above, one CG round fits the time, so the loose phase cannot
# pay off, and re-solving with the caps did not finish in 16 s (20,000 workloads, 70.8 M)
LOOSE_FIT_MIN_COLS, LOOSE_FIT_MAX_COLS = 500_000, 20_000_000
# large-neighbourhood search: its share of the time left after the first MIPs, how many classes
# each neighbourhood frees, and each MIP's time
LNS_SHARE = 0.6
LNS_MIN_FREE, LNS_START_FREE = 5, 30
LNS_MIP_S = 1.5
# each free class is offered its best-priced columns, more when a neighbourhood of every class fails
LNS_BEST_PRICED, LNS_MAX_PRICED = 5, 40
# the second neighbourhood offers each class its best-priced columns on the LP's pools: 5, and on
# big requests 1, or 2 to a class the LP splits over several columns (3,000 workloads, three runs:
# 1,338.4-1,340.9 $/h, solved in 5-7 s, where 1 for every class gave 1,341.5-1,342.7; 2 for every
# class, 8k columns, ran to its limit; 3 for split classes, 1,342.6 and 1,349.9)
SECOND_BEST, SECOND_BIG_BEST, SECOND_BIG_SPLIT = 5, 1, 2
# above this many columns the final MIP does not finish its root in the time left (300 workloads:
# 51k columns, dual bound 0 after 3-7 s, no better answer in 12 runs): it is skipped, LNS takes the time
FINAL_MIP_MAX_COLS = 20_000
# shares of the time left: the share bound's thread (beside the MIPs), RENS and the second
# neighbourhood on big requests (no LNS follows them there). 3,000 workloads: the second
# neighbourhood solved to optimality in 10.9 s with 0.9 (1,380.9 -> 1,350.1 $/h), and with 0.5 it
# was stopped at 7 s with nothing better; RENS at 20,000 found nothing better with 43 s than with 20
SHARE_BOUND_SHARE, RENS_BIG, SECOND_BIG = 0.8, 0.6, 0.9
# universe columns from which the share bound is priced by its relaxation's LP, solved by column
# generation in a thread from the start until RELAXED_CG_END of the time (3,000 workloads, 14.7 M
# columns: it converged in 7 rounds, 14 s alone), its ascent and egress pricing ending by RELAXED_END
RELAXED_MIN_COLS, RELAXED_CG_END, RELAXED_END = 5_000_000, 0.7, 0.9
# MIPs from this many columns run in a child process killed at their limit (mip_process.py): HiGHS'
# cut separation overran by 12 s at 7.6k columns; below this size none was seen to overrun, and the
# CI-sized request's MIPs stay in process (no pipe, no child to start)
ISOLATE_MIN_COLS = 2_000
# column generation stops when its next round would end past this share of the time left, which
# is kept for the MIPs: 3,000 workloads got two rounds with a half (2.20 % gap) and three with
# 0.35 (1.81 %, the same in two runs each); 0.2-0.3 gave three or four rounds and 1.65-2.0 %
CG_END = 0.35


@dataclass
class SearchResult:
    status: str
    x: ClassPlacement
    objective: float  # model objective of x (egress at its cheapest destination)
    lower_bound: float
    proven: bool
    pools_considered: int
    lp_rounds: int


def initial_columns(mi: ModelInput, u: Universe, *, per_class: int = 4, sites_extra: int = 2) -> IntArray:
    """A small start: each class's cheapest pools (whole nodes alone, and divisible nodes),
    its cheapest pool at a few more sites when it must spread, and owned pools. Per class with
    scalar demands (ModelInput.fit gathers them per column: 10.9 s at 20,000 workloads), what only
    the candidate set and demand decide computed once for the classes that share them (20,000
    workloads: 10,255 classes, 1,220 such groups; 6.8 -> 2.0 s), one group at a time."""
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


def class_nodes(mi: ModelInput, x: ClassPlacement) -> dict[int, int]:
    """Nodes per pool: the aggregate capacity rule and one node per `fit` replicas of each class."""
    load: dict[int, FloatArray] = {}
    need: dict[int, int] = {}
    pairs = np.array(list(x), dtype=np.int64).reshape(-1, 2)
    fits = mi.fit(pairs[:, 0], pairs[:, 1])[0].tolist()
    for ((c, p), r), fit in zip(x.items(), fits, strict=True):
        load[p] = load.get(p, np.zeros(3)) + r * mi.classes[c].demand
        need[p] = max(need.get(p, 0), math.ceil(r / fit - 1e-9))
    out: dict[int, int] = {}
    for p, ld in load.items():
        caps = np.array([mi.vcpus[p], mi.mem[p], max(mi.gpus[p], 1e-12)])
        agg = math.ceil(float(np.max(ld / caps)) - 1e-9)
        out[p] = max(1, agg, need[p])
    return out


def _feasible(mi: ModelInput, x: ClassPlacement, nodes: dict[int, int]) -> bool:
    if any(n > mi.max_nodes[p] for p, n in nodes.items()):
        return False
    if mi.max_moves is not None and kept(mi, x) < mi.current_total - mi.max_moves - 1e-9:
        return False
    return not _broken_classes(mi, x)


def _broken_classes(mi: ModelInput, x: ClassPlacement) -> set[int]:
    """Classes whose own rules x breaks: replicas, spot cap, distinct sites."""
    per_class: dict[int, int] = {}
    spot: dict[int, int] = {}
    at_site: dict[tuple[int, int], int] = {}
    for (c, p), r in x.items():
        per_class[c] = per_class.get(c, 0) + r
        if mi.cap_idx[p] == 1:
            spot[c] = spot.get(c, 0) + r
        key = (c, int(mi.site_idx[p]))
        at_site[key] = at_site.get(key, 0) + r
    slots: dict[int, int] = {}  # distinct-site slots per class: sum_s min(x_cs, K_c)
    for (c, _s), r in at_site.items():
        slots[c] = slots.get(c, 0) + min(r, mi.classes[c].size)
    return {
        i
        for i, cl in enumerate(mi.classes)
        if per_class.get(i, 0) != cl.replicas
        or (cl.spot_cap is not None and spot.get(i, 0) > cl.spot_cap)
        or (cl.min_sites > 1 and slots.get(i, 0) < cl.min_sites * cl.size)
    }


def _repaired(mi: ModelInput, x: ClassPlacement, fallback: ClassPlacement) -> ClassPlacement:
    """x with each class whose own rules it breaks placed as in `fallback` (a feasible answer).
    The rounded LP breaks a few spot caps or spreads (3,000 workloads: one class); repaired, it
    is the incumbent, and RENS offers the LP's support alone. Unrepaired, the Kubernetes-style
    start (1,460 $/h against 1,371) was the incumbent, its columns doubled RENS to 6.6k replica
    columns, which did not finish (1,350-1,366 $/h where it finishes in 2 s: 1,342)."""
    broken = _broken_classes(mi, x)
    if not broken:
        return x
    out = {k: r for k, r in x.items() if k[0] not in broken}
    out.update({k: r for k, r in fallback.items() if k[0] in broken})
    return out


def objective(mi: ModelInput, lay: Layout, x: ClassPlacement, *, routed: bool = True) -> float:
    """What x costs: nodes, site costs, moves and egress, the egress as solve() reports it
    (`routed_egress`) or, with routed=False, as the model prices it (never more). Incumbents
    are compared by the first: at 300 workloads the two differed by up to 0.43 $/h."""
    nodes = class_nodes(mi, x)
    value = sum(n * float(mi.node_cost[p]) for p, n in nodes.items())
    for (c, p), r in x.items():
        cl = mi.classes[c]
        value += r * float(cl.rep_cost[int(np.searchsorted(cl.cand, p))])
    value += routed_egress(mi, x) if routed else egress_values(mi, lay, x).cost(lay)
    if mi.current_total:
        value += mi.move_cost * (mi.current_total - kept(mi, x))
    return value


def routed_egress(mi: ModelInput, x: ClassPlacement) -> float:
    """costs.routed_egress of the classes (those with dependencies are single workloads)."""
    frac: list[dict[int, float]] = [{} for _ in mi.classes]
    for (c, p), r in x.items():
        s = int(mi.site_idx[p])
        frac[c][s] = frac[c].get(s, 0.0) + r / mi.classes[c].replicas
    deps = [(k, v, gib) for k, cl in enumerate(mi.classes) for v, gib in cl.deps]
    return mi.cost_weight * costs.routed_egress(frac, deps, mi.egress)


def kept(mi: ModelInput, x: ClassPlacement) -> float:
    """Replicas that stay on the pool they run on now."""
    return sum(
        min(float(x.get((int(c), int(p)), 0)), float(cur))
        for c, p, cur in zip(mi.keep_class, mi.keep_pool, mi.keep_cur, strict=True)
    )


def _round_lp(mi: ModelInput, cls: IntArray, pool: IntArray, xv: FloatArray) -> ClassPlacement:
    """Largest-remainder rounding of the LP's replicas per class."""
    out: ClassPlacement = {}
    live = xv > 1e-7
    for c, cl in enumerate(mi.classes):
        idx = np.flatnonzero((cls == c) & live)
        if len(idx) == 0:
            continue
        vals = xv[idx]
        base = np.floor(vals + 1e-9)
        short = cl.replicas - int(base.sum())
        if short > 0:
            base[np.argsort(-(vals - base), kind="stable")[:short]] += 1
        for i, r in zip(idx, base, strict=True):
            if r > 0:
                out[(c, int(pool[i]))] = int(r)
    return out


def _columns_of(x: ClassPlacement | None, cols: XColumns) -> IntArray:
    """Universe positions of a placement's (class, pool) pairs."""
    if not x:
        return np.zeros(0, dtype=np.int64)
    pairs = np.array(list(x), dtype=np.int64)
    pos = cols.position(pairs[:, 0], pairs[:, 1])
    return pos[pos >= 0]


def in_thread(name: str, fn: Callable[..., float], *args: Any, **kw: Any) -> Future[float]:
    """fn(*args, **kw) in a thread of its own, which ends with it."""
    pool = ThreadPoolExecutor(1, thread_name_prefix=name)
    out = pool.submit(fn, *args, **kw)
    pool.shutdown(wait=False)
    return out


def search(
    mi: ModelInput,
    *,
    starts: list[ClassPlacement],
    time_limit_s: float,
    seed: int,
    rel_gap: float = 0.01,
    max_rounds: int = 200,
    include_cols: int = 40_000,
    per_class: int = 8,
    pools_per_round: int = 100,
    prove: bool = True,
) -> SearchResult | None:
    """The placement of `mi` within time_limit_s. prove=False: no bound beyond the LP's and the MIPs' (a
    group of split.py, whose bound is the whole request's): no bound threads, no Lagrangian bound."""
    started = time.perf_counter()

    def left() -> float:
        return time_limit_s - (time.perf_counter() - started)

    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    if uni.size > LOOSE_FIT_MIN_COLS:  # its MIPs will be big: the child starts during CG
        mip_process.prestart()
    # on big requests column generation starts with fit rows not capped at the class's replicas
    # and caps them once that LP converges (Master.tighten): the capped rows make every LP slower
    # (300 workloads: CG converged in 11 s with them from the start, in 6.4 s in two phases); on
    # small ones the second phase costs more than it saves (CI-sized request: 120 -> 148 ms)
    m = Master(mi, lay, uni, loose_fit=LOOSE_FIT_MIN_COLS < uni.size <= LOOSE_FIT_MAX_COLS)
    first = [initial_columns(mi, uni)] + [_columns_of(x0, uni.cols) for x0 in starts]
    if len(lay.keep_key):  # where replicas run now stays on the table
        pos = uni.cols.position(mi.keep_class, mi.keep_pool)
        first.append(pos[pos >= 0])
    m.add_columns(np.concatenate(first))
    share_bound: Future[float] | None = None
    no_bound_needed = threading.Event()  # the relaxed bound's thread ends early once set
    if prove and RELAXED_MIN_COLS < uni.size <= LOOSE_FIT_MAX_COLS:
        # column generation cannot converge here in time: the share bound, priced by its own
        # relaxation's LP (relaxed_bound.py), starts at once in a thread beside it
        share_bound = in_thread(
            "relaxed-bound", relaxed_bound, mi, lay, uni, np.concatenate(first), egress=EgressColumns.of(lay),
            cg_until=started + RELAXED_CG_END * time_limit_s, until=started + RELAXED_END * time_limit_s,
            stop=no_bound_needed,
        )  # fmt: skip
    z_lp = -math.inf
    lagrangian = -math.inf
    loose_bound = -math.inf  # the converged LP with loose fit rows: a relaxation's LP
    converged = False
    rounds = 0
    lp_x: ClassPlacement | None = None
    lp_support: IntArray = np.zeros(0, dtype=np.int64)
    rc_pools: IntArray = np.zeros(0, dtype=np.int64)
    rc_p: FloatArray = np.zeros(0)
    rc_x = ColumnCosts(np.zeros(0, dtype=np.int64), np.zeros(0))
    priced: Priced | None = None
    round_s = 0.0  # how long the last round took
    for rounds in range(1, max_rounds + 1):
        round_start = time.perf_counter()
        # a round's LP can take seconds on big requests: never past the request's time
        # (after the first, a round must end before the MIPs' share, CG_END, less 5 %: one cut off is time lost)
        lp = m.solve_lp(time_limit_s=left() - (0.1 if rounds == 1 else CG_END - 0.05) * time_limit_s)
        if lp is None:
            break
        z_lp = lp.value
        lp_x = _round_lp(mi, *m.x_keys(), lp.x)
        lp_support = m.x_uni[lp.x > 1e-7]
        priced = price(mi, uni, m, lp.row_dual, z_lp)
        rc_x, rc_pools, rc_p = priced.cols, priced.pools.pools, priced.pools.val
        if priced.converged:
            if m.loose_fit:
                loose_bound = z_lp
                m.tighten()
                continue
            converged = True
            break
        # CG rounds are cheap (the basis is kept); the Lagrangian bound reads the whole universe
        # (~1 us per column), so it is computed once, from the last duals, when CG must stop
        # early (every round it took most of the round's time, and CG converged 4x later),
        # and only when it fits the request's time at all
        lag_s = BOUND_SECONDS_PER_COL * uni.size
        lag_ok = prove and 1.5 * lag_s < 0.5 * time_limit_s
        # stop when the next round, three times as long as this one (LPs grow: 20,000 workloads,
        # 8 s then 30 s), would end in the MIPs' share of the time: an LP cut off by its limit is time lost,
        # and a bigger LP support made the RENS MIP's cut separation run 46 s past its limit there
        round_s = time.perf_counter() - round_start
        if left() < time_limit_s * CG_END + (1.5 * lag_s if lag_ok else 0.0) + 3.0 * round_s:
            if lag_ok:
                lagrangian = lagrangian_bound(mi, uni, m, lp.row_dual)
            break
        m.add_columns(entering(uni, priced, lp.row_dual[: lay.n_fixed_rows], per_class, pools_per_round))

    if converged:  # the LP is the bound
        no_bound_needed.set()
    if m.loose_fit:
        # stopped before the loose phase converged: the loose LP spreads small classes over many
        # pools in slivers of nodes, a poor guide for the MIPs, so the capped rows go in and the
        # LP is re-solved (3,000 workloads: 1.1 s, and RENS 1,350.5 where the loose support gave 1,364.7)
        m.tighten()
        tight = m.solve_lp(time_limit_s=min(left() - (CG_END - 0.05) * time_limit_s, 0.15 * time_limit_s))
        if tight is not None:
            z_lp = tight.value
            lp_x = _round_lp(mi, *m.x_keys(), tight.x)
            lp_support = m.x_uni[tight.x > 1e-7]
    lp_pool = np.zeros(mi.n_pools, dtype=bool)
    lp_pool[uni.cols.pool[lp_support]] = True
    if not converged or m.n_cols > FINAL_MIP_MAX_COLS:
        # no reduced-cost inclusion follows: keep only the priced columns the MIPs below read
        rc_x = shortlist(uni.cols, rc_x, LNS_MAX_PRICED, lp_pool[uni.cols.pool[rc_x.idx]], SECOND_BEST)
        priced = None
    # the LP-free share bound runs in a thread beside the MIPs, which mostly wait on their child
    # process (mip_process.py) or on HiGHS, either way without the GIL: its ascent gains with time
    # (3,000 workloads: 1,312 after 4 s, 1,321.3 after 8.7 s). Not when the Lagrangian bound is
    # already next to z_LP, which no other bound can pass (300 workloads: 124.2 beside 128.97)
    if prove and share_bound is None and not converged and max(lagrangian, loose_bound) < (1 - rel_gap / 2) * z_lp:
        share_bound = in_thread(
            "share-bound", simple_bound, mi, time_budget_s=SHARE_BOUND_SHARE * left(), egress=EgressColumns.of(lay)
        )
    feasible = [x0 for x0 in starts if _feasible(mi, x0, class_nodes(mi, x0))]
    incumbent = min(feasible, key=lambda xx: objective(mi, lay, xx)) if feasible else None
    ub = objective(mi, lay, incumbent) if incumbent is not None else math.inf
    if lp_x is not None and incumbent is not None:
        lp_x = _repaired(mi, lp_x, incumbent)
    if lp_x is not None and _feasible(mi, lp_x, class_nodes(mi, lp_x)) and (v := objective(mi, lay, lp_x)) < ub:
        incumbent, ub = lp_x, v

    def hint(mm: Master) -> FloatArray | None:
        return mm.hint(incumbent, class_nodes(mm.mi, incumbent)) if incumbent is not None else None

    mine = _columns_of(incumbent, uni.cols)
    m.add_columns(mine)

    def improve(cols: IntArray, seconds: float, free: BoolArray | None = None, until: float = math.inf) -> bool:
        """A small MIP over `cols` and the incumbent's columns, warm-started; keeps a better answer.
        With `free`, the other classes keep their replicas. True when the MIP was solved. A child's
        kill grace comes out of `seconds`, and the MIP ends by `until` (model building included)."""
        nonlocal incumbent, ub
        if incumbent is None:
            sub = Master(mi, lay, uni)
            sub.add_columns(cols)
        else:
            # a model of its own over just these columns: its spread and egress rows cover only
            # the sites offered (RENS at 20,000 workloads: 46.7k columns instead of 520k)
            offer = np.concatenate([cols, _columns_of(incumbent, uni.cols)])
            sub_mi = mi.restricted(uni.cols.cls(offer), uni.cols.pool[offer])
            sub_lay = make_layout(sub_mi)
            sub_uni = make_universe(sub_mi, sub_lay)
            sub = Master(sub_mi, sub_lay, sub_uni)
            sub.add_columns(np.arange(sub_uni.size))
            if free is not None:
                sub.hold(free, incumbent)
        big = sub.n_cols >= ISOLATE_MIN_COLS
        seconds = min(seconds, until - time.perf_counter()) - (mip_process.GRACE_S if big else 0.0)
        rs = sub.solve_mip(time_limit_s=seconds, seed=seed, hint=hint(sub), rel_gap=rel_gap / 4, isolated=big)
        if rs.status in ("optimal", "feasible"):
            xs = sub.placement(rs.x)
            if objective(mi, lay, xs) < ub - 1e-9:
                incumbent, ub = xs, objective(mi, lay, xs)
                m.add_columns(_columns_of(incumbent, uni.cols))
        return rs.status == "optimal"

    if len(lp_support):
        # a small MIP over the LP's support (RENS): packing the LP's pools into whole nodes
        # is most of what separates it from a good placement (12 workloads: from 4.8 % over
        # the LP to 0.7 % in ~20 ms, where the full MIP's own heuristics took 0.5 s)
        # on big requests only the second neighbourhood follows (no LNS, no final MIP), and
        # RENS needed 2.4 s at 3,000 workloads once (1,397 with 1.3 s): it gets more time there
        small = uni.size <= NEIGHBOURHOOD_MAX_COLS
        improve(lp_support, (0.25 if small else RENS_BIG) * left())
        # before CG converges the restricted LP bounds nothing: only a proven gap ends the search
        # (20,000 workloads: RENS within 1 % of it ended the search 20 s early)
        if incumbent is not None and (not converged or ub - z_lp > rel_gap * ub):
            # then every class may move onto any pool the LP uses (its 5 best there by reduced
            # cost; on big requests 1, 2 if the LP splits it): whole nodes shared with other
            # classes. All columns there (8k at 300 workloads) made HiGHS' root cut rounds run 16 s
            # past a 4 s limit, so not above FINAL_MIP_MAX_COLS either. Half the time left where
            # LNS follows: solved to the end it reaches 130.18 $/h at 300 workloads (in 16 s); with
            # half, runs over 4 seeds end 0.86-1.10 % above the LP, with 0.3 1.04-1.19 %
            on_lp = lp_pool[uni.cols.pool[rc_x.idx]]
            if small:
                best = best_per_class(uni.cols, rc_x, on_lp, SECOND_BEST)
            else:
                split = np.bincount(uni.cols.cls(lp_support), minlength=len(mi.classes)) >= 2
                best = np.union1d(
                    best_per_class(uni.cols, rc_x, on_lp, SECOND_BIG_BEST),
                    best_per_class(uni.cols, rc_x, on_lp & split[uni.cols.cls(rc_x.idx)], SECOND_BIG_SPLIT),
                )
            second = np.union1d(lp_support, best)
            if len(second) <= FINAL_MIP_MAX_COLS:
                improve(second, (0.5 if small else SECOND_BIG) * left())
    if incumbent is not None and (not converged or ub - z_lp > rel_gap * ub):
        # large-neighbourhood search (lns.py): a few classes at a time re-placed around the open
        # nodes, for most of what is left; the MIP below keeps the rest (it proves small requests).
        # 300 workloads: 1.07-1.21 % where the final MIP alone left 1.27-1.49 %. On big requests it
        # takes what the second neighbourhood leaves (20,000 workloads, after RENS, which the
        # restricted LP called within 1 %: 8,917.1 -> 8,905-8,908 over three runs; 3,000: its
        # neighbourhoods offer 72-74k columns and found nothing better in a traced run); their
        # MIPs overran 1.5 s limits by up to 9 s in process, the child's kill holds them
        end = time.perf_counter() + (LNS_SHARE if m.n_cols <= FINAL_MIP_MAX_COLS else 0.85) * left()
        rng = np.random.default_rng(seed)
        # neighbourhoods grow while their MIPs finish fast and shrink when they run out of time
        target = float(max(LNS_MIN_FREE, min(LNS_START_FREE, len(mi.classes) // 10)))
        priced_cls = uni.cols.cls(rc_x.idx)
        lp_cls = uni.cols.cls(lp_support)
        best_k = LNS_BEST_PRICED
        # not a MIP that would get less than a third of its time (building its model takes some)
        while incumbent is not None and (now := time.perf_counter()) < end - LNS_MIP_S / 3:
            nodes = class_nodes(mi, incumbent)
            free = pick_classes(mi, incumbent, nodes, rng, int(target))
            offer = [
                columns_on_pools(uni.cols, free, np.array(sorted(nodes), dtype=np.int64)),
                lp_support[free[lp_cls]],
                best_per_class(uni.cols, rc_x, free[priced_cls], best_k),
            ]
            before = ub
            solved = improve(np.concatenate(offer), LNS_MIP_S, free, until=end)
            if solved and free.all() and ub >= before:
                # every class was free and nothing better exists among what was offered: offer
                # more of the best-priced columns (at 300 workloads the search stopped 9 s early)
                best_k *= 2
                if best_k > LNS_MAX_PRICED:
                    break
            fast = time.perf_counter() - now < LNS_MIP_S / 4
            target = min(target * 1.5, len(mi.classes)) if solved and fast else max(LNS_MIN_FREE, target / 1.5)

    status = "feasible"
    bound = -math.inf
    excluded_min = math.inf
    # above FINAL_MIP_MAX_COLS the final MIP never finished its root nor bettered the answer in
    # any run, and its cut separation ignores both the time limit and the watchdog (3,000
    # workloads: 150 s for a 12 s limit): the incumbent stands, and the bound is z_LP or the
    # Lagrangian/share bound, which never needed it
    final_mip = m.n_cols <= FINAL_MIP_MAX_COLS or incumbent is None
    if converged and incumbent is not None and ub - z_lp <= rel_gap * ub:
        bound = z_lp  # already within the target: the LP bound holds for the whole catalog
    elif converged and final_mip:
        # every column and pool that could still pay off joins (reduced-cost inclusion);
        # a placement using anything left out costs at least z_LP + its reduced cost. Only the
        # gap target has to be proven: what could save less than (most of) it stays out
        room = ub - z_lp - 0.9 * rel_gap * ub
        extra = ~m.in_model[rc_x.idx] & (rc_x.val < room)
        # the most promising first: a MIP over hundreds of thousands of columns does not even
        # finish its root in time (300 workloads: 245k columns, no progress in 80 s)
        extra_cols = rc_x.idx[extra][np.argsort(rc_x.val[extra], kind="stable")[:include_cols]]
        pool_out = m.pool_col[rc_pools] < 0
        pays = pool_out & (rc_p < room)
        order = np.flatnonzero(pays)[np.argsort(rc_p[pays], kind="stable")]
        new_pools = np.zeros(len(rc_pools), dtype=bool)
        added = 0
        grow: list[IntArray] = [extra_cols]
        for i in order:
            on_pool = uni.pool_columns(int(rc_pools[i]))
            if added + len(on_pool) > include_cols:
                break
            new_pools[i] = True
            added += len(on_pool)
            grow.append(on_pool.astype(np.int64))  # every column of an included pool
        left_pools = pool_out & ~new_pools
        if left_pools.any():
            excluded_min = min(excluded_min, float(rc_p[left_pools].min()))
        m.add_columns(np.concatenate(grow))
        rest_cols = ~m.in_model[rc_x.idx]
        if rest_cols.any():
            excluded_min = min(excluded_min, float(rc_x.val[rest_cols].min()))
    if bound == -math.inf and final_mip:
        # HiGHS overruns its limit by a few seconds on big models (presolve, the root LP): keep a margin
        res = m.solve_mip(
            time_limit_s=0.75 * left(), seed=seed, hint=hint(m), rel_gap=rel_gap, isolated=m.n_cols >= ISOLATE_MIN_COLS
        )
        if res.status == "infeasible" and incumbent is None:
            no_bound_needed.set()
            return None
        if res.status in ("optimal", "feasible"):
            xm = m.placement(res.x)
            if incumbent is None or objective(mi, lay, xm) < ub - 1e-9:
                incumbent, ub = xm, objective(mi, lay, xm)
        status = res.status
        bound = res.bound if res.status in ("optimal", "feasible", "unknown") else -math.inf
        if not math.isfinite(bound):
            bound = z_lp
    if incumbent is None:
        no_bound_needed.set()
        return None
    x = incumbent
    value = objective(mi, lay, x)
    fallback = share_bound.result() if share_bound is not None and not converged else -math.inf
    lower = max(z_lp, min(bound, z_lp + excluded_min)) if converged else max(lagrangian, fallback, loose_bound)
    # HiGHS' dual bound carries solver tolerances; never claim more than is proven
    lower = min(lower * (1 - 1e-9), value)
    return SearchResult(
        status=status,
        x=x,
        objective=value,
        lower_bound=lower,
        proven=converged,
        pools_considered=len(m.pools),
        lp_rounds=rounds,
    )
