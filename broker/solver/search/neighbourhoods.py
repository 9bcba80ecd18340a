"""Phase 3 of the search: neighbourhoods of the incumbent, each a small MIP.

- RENS: a MIP over the LP's support. Packing the LP's pools into whole nodes is most of what
  separates it from a good placement, and HiGHS' own heuristics on the full MIP take far longer.
- The second neighbourhood: every class may move onto any pool the LP uses (its best columns
  there by reduced cost), so classes can share whole nodes the LP split fractionally.
- Large-neighbourhood search (LNS): the incumbent is typically a little above the LP, whole
  nodes half-used where a few classes could share them. One MIP over every class frees too much
  (HiGHS does not finish its root in time); a neighbourhood frees the classes on the nodes that
  waste the most, at one site at a time, and offers them every pool the incumbent runs (the idle
  room of open nodes), their LP columns and those of least reduced cost. Everything else keeps its
  replicas, so each MIP is small and fast.

HiGHS' root cut rounds are not interruptible, so every offer is kept small: all the columns on
the LP's pools made the second neighbourhood run far past its limit.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.model.columns import XColumns
from broker.solver.model.layout import ModelInput
from broker.solver.model.reduced_costs import best_per_class
from broker.solver.search.egress_neighbourhoods import (
    co_location_columns,
    dependencies,
    egress_per_component,
    pick_components,
)
from broker.solver.search.incumbent import improve
from broker.solver.search.placements import class_nodes, routed_egress
from broker.solver.search.state import SearchState
from broker.solver.types import ClassPlacement


def rens_and_second(st: SearchState) -> None:
    """RENS over the LP's support, then, while the gap is open, the second neighbourhood. On big
    requests both get more of the time, and the second is left out where egress is a large part
    of the cost: the LNS's dependency neighbourhoods find more there."""
    mi, uni, opts = st.mi, st.uni, st.opts
    if not len(st.lp_support):
        return
    small = uni.size <= opts.neighbourhood_max_cols
    improve(st, st.lp_support, (opts.rens_share if small else opts.rens_share_big) * st.left())
    if not st.gap_open():
        return
    x = st.incumbent
    if not small and x is not None and routed_egress(mi, x) >= opts.second_max_egress_share_big * st.ub:
        return
    # each class's best columns by reduced cost on the LP's pools: a few, and on big requests
    # one, or two to a class the LP splits over several columns
    rc_x = st.rc_x
    on_lp = st.lp_pool[uni.cols.pool[rc_x.idx]]
    if small:
        best = best_per_class(uni.cols, rc_x, on_lp, opts.second_best)
    else:
        split = np.bincount(uni.cols.cls(st.lp_support), minlength=len(mi.classes)) >= 2
        best = np.union1d(
            best_per_class(uni.cols, rc_x, on_lp, opts.second_big_best),
            best_per_class(uni.cols, rc_x, on_lp & split[uni.cols.cls(rc_x.idx)], opts.second_big_split),
        )
    second = np.union1d(st.lp_support, best)
    if len(second) <= opts.final_mip_max_cols:
        improve(st, second, (opts.second_share if small else opts.second_share_big) * st.left())


def large_neighbourhoods(st: SearchState) -> None:
    """LNS for most of what is left while the gap is open: a few classes at a time re-placed
    around the open nodes; the final MIP keeps the rest of the time (it proves small requests).
    Without a final MIP (big restricted models) it takes more. Neighbourhoods grow while their
    MIPs finish fast and shrink when they run out of time."""
    if not st.gap_open():
        return
    mi, uni, opts = st.mi, st.uni, st.opts
    deps = dependencies(mi)
    # with traffic to trade and no converged LP, the final MIP proves nothing: LNS takes its time
    long = st.m.n_cols > opts.final_mip_max_cols or (deps.any and not st.converged)
    end = st.until(opts.lns_share_big if long else opts.lns_share)
    turns = opts.work_limits.lns_turns if opts.work_limits is not None else None
    rng = np.random.default_rng(st.seed)
    target = float(max(opts.lns_min_free, min(opts.lns_start_free, len(mi.classes) // 10)))
    priced_cls = uni.cols.cls(st.rc_x.idx)
    lp_cls = uni.cols.cls(st.lp_support)
    best_k = opts.lns_offered_columns
    # not a MIP that would get less than a third of its time (building its model takes some)
    for turn in itertools.count():
        now = time.perf_counter()
        if st.incumbent is None or (turns is not None and turn >= turns):
            break
        # (under work limits the clock only guards: a MIP ends by its nodes)
        if now >= end - (opts.lns_mip_s / 3 if turns is None else opts.improve_min_s):
            st.out_of_time |= turns is not None
            break
        nodes = class_nodes(mi, st.incumbent)
        # every egress_every-th neighbourhood frees dependency components by the egress they pay
        egress_turn = deps.any and opts.egress_every > 0 and turn % opts.egress_every == 0
        paid = egress_per_component(mi, deps, st.incumbent) if egress_turn else None
        traded = paid is not None and paid.sum() > 0
        if traded and paid is not None:
            free = pick_components(deps, paid, rng, int(target), len(mi.classes))
        else:
            free = pick_classes(mi, st.incumbent, nodes, rng, int(target))
        offer = [
            columns_on_pools(uni.cols, free, np.array(sorted(nodes), dtype=np.int64)),
            st.lp_support[free[lp_cls]],
            best_per_class(uni.cols, st.rc_x, free[priced_cls], best_k),
        ]
        if traded:
            offer.append(co_location_columns(mi, uni.cols, deps, st.incumbent, free, opts.egress_per_cloud))
        before = st.ub
        solved = improve(st, np.concatenate(offer), opts.lns_mip_s, free, until=end)
        if solved and free.all() and st.ub >= before:
            # every class was free and nothing better exists among what was offered: offer
            # more columns of least reduced cost rather than stop early
            best_k *= 2
            if best_k > opts.lns_max_offered_columns:
                break
        # under work limits a neighbourhood grows on what its MIP proved alone, not on the clock
        fast = turns is not None or time.perf_counter() - now < opts.lns_mip_s / 4
        grown = min(target * 1.5, len(mi.classes))
        target = grown if solved and fast else max(opts.lns_min_free, target / 1.5)


def idle_cost(mi: ModelInput, x: ClassPlacement, nodes: dict[int, int]) -> dict[int, float]:
    """Per open pool: what its nodes' unused share costs (by the busier of cpu and memory)."""
    load: dict[int, FloatArray] = {}
    for (c, p), r in x.items():
        load[p] = load.get(p, np.zeros(3)) + r * mi.classes[c].demand
    out: dict[int, float] = {}
    for p, n in nodes.items():
        used = max(load[p][0] / (n * mi.vcpus[p]), load[p][1] / (n * mi.mem[p]))
        out[p] = float(mi.node_cost[p]) * n * max(0.0, 1.0 - used)
    return out


def pick_classes(
    mi: ModelInput, x: ClassPlacement, nodes: dict[int, int], rng: np.random.Generator, target: int
) -> BoolArray:
    """Classes to free: those at a site drawn by its idle cost, then more sites the same way,
    until `target` classes are free. A site with more classes than that gives those on its
    idlest pools first: on big requests one site can hold hundreds of classes, whose MIP would
    not finish in its time."""
    idle = idle_cost(mi, x, nodes)
    site_idle: dict[int, float] = {}
    for p, v in idle.items():
        s = int(mi.site_idx[p])
        site_idle[s] = site_idle.get(s, 0.0) + v + 1e-9
    on_pool: dict[int, list[int]] = {}
    for c, p in x:
        on_pool.setdefault(p, []).append(c)
    at_site: dict[int, list[int]] = {}  # a site's classes, those on its idlest pools first
    for p in sorted(on_pool, key=lambda q: -idle.get(q, 0.0)):
        at_site.setdefault(int(mi.site_idx[p]), []).extend(on_pool[p])
    free = np.zeros(len(mi.classes), dtype=bool)
    sites = list(site_idle)
    weights = np.array([site_idle[s] for s in sites])
    while (need := target - int(free.sum())) > 0 and weights.sum() > 0:
        k = int(rng.choice(len(sites), p=weights / weights.sum()))
        more = [c for c in dict.fromkeys(at_site[sites[k]]) if not free[c]]
        free[more[:need]] = True
        weights[k] = 0.0
    return free


def columns_on_pools(cols: XColumns, free: BoolArray, pools: IntArray) -> IntArray:
    """Every column (c, p) with c free and p in `pools` that is a candidate of c."""
    c = np.repeat(np.flatnonzero(free), len(pools))
    p = np.tile(pools, int(free.sum()))
    pos = cols.position(c, p)
    return pos[pos >= 0]
