"""A start that co-locates each dependency component where compute and egress together cost least.

The baselines (and the rounded LP) place a service and its callers independently, each where its
own compute is cheapest, so their traffic crosses sites, often clouds, until the search finds a
co-location. This start takes a feasible placement and, component by component (a service with
its callers, the ones paying the most egress first), tries to move the whole component to one
site: the few sites where its compute plus egress is estimated cheapest, and the sites where its
members run now (a first pass over every component at the best of them, a second at the rest).
A member that may not run at that site (residency, latency SLO, capacity type) goes where its
own compute plus its traffic to that site costs least; a spread member keeps one slot at each of
its other sites and brings the rest; a spot cap is kept by putting only the allowed replicas on
spot. A move is kept only when it lowers the placement's exact cost (nodes counted as
`class_nodes` does, replica costs, routed egress, moves) and keeps owned capacity and the cap on
moves, so the start is feasible whenever the placement it starts from is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver import costs
from broker.solver.model.layout import ModelInput
from broker.solver.prepare.classes import SPOT
from broker.solver.problem import GIB_IN_GB
from broker.solver.search.egress_neighbourhoods import dependencies, egress_per_component
from broker.solver.types import ClassPlacement

ClassPools = dict[int, int]  # pool -> replicas of one class


def co_located(mi: ModelInput, x: ClassPlacement, *, sites_tried: int = 3, until: float = math.inf) -> ClassPlacement:
    """x with dependency components moved, one at a time, to the site that lowers the
    placement's cost most (or left as they are); stops at `until` (perf_counter)."""
    deps = dependencies(mi)
    if not deps.any or not x:
        return x
    paid = egress_per_component(mi, deps, x)
    st = _Placed.of(mi, x)
    members: dict[int, list[int]] = {}
    for c, k in enumerate(deps.component.tolist()):
        members.setdefault(k, []).append(c)
    local = np.zeros(len(mi.classes), dtype=np.int64)  # a class's index in its component
    for those in members.values():
        local[those] = np.arange(len(those))
    pairs: dict[int, list[tuple[int, int, float]]] = {}  # per component, in its own indices
    sends, receives = np.zeros(len(mi.classes)), np.zeros(len(mi.classes))
    for k, v, gib in deps.pairs:
        pairs.setdefault(int(deps.component[k]), []).append((int(local[k]), int(local[v]), gib))
        sends[k] += mi.cost_weight * GIB_IN_GB * gib
        receives[v] += mi.cost_weight * GIB_IN_GB * gib
    known: dict[int, dict[int, _Member]] = {}
    sites: dict[int, list[int]] = {}
    # a first pass tries each component at its best estimated site only, the next at the others
    # of its `sites_tried` (chosen before it moved): on big requests the time runs out before one
    # pass over every site ends, and the first pass reaches most of the gain in less than half
    # the time
    order = [k for k in np.argsort(-paid, kind="stable").tolist() if paid[k] > 1e-9]
    for first in (True, False):
        for k in order:
            if time.perf_counter() >= until:
                break
            if k not in known:
                known[k] = _members(mi, members[k], sends, receives)
            comp = known[k]
            if first:
                sites[k] = _sites_to_try(mi, st, comp, sites_tried, float(paid[k]))
            best: tuple[float, dict[int, ClassPools]] | None = None
            for s in sites[k][:1] if first else sites.get(k, [])[1:]:
                moved = _component_at(mi, st, comp, s)
                if moved is None:
                    continue
                gain = st.delta(moved, members[k], pairs[k])
                if gain is not None and gain < -1e-9 and (best is None or gain < best[0]):
                    best = (gain, moved)
            if best is not None:
                st.apply(best[1])
    return st.placement()


@dataclass
class _Placed:
    """A placement kept per class and per pool, with each pool's load and replica needs, so a
    move's exact cost change reads only the pools it touches (plain Python numbers: these are
    many small updates, where numpy's per-call cost dominates)."""

    mi: ModelInput
    by_class: list[ClassPools]
    on_pool: dict[int, dict[int, int]]  # pool -> class -> replicas
    load: dict[int, list[float]]  # pool -> cpu, memory, gpus
    large: dict[int, list[float]]  # pool -> its large-replica rows' weights (ModelInput.large_weights)
    needs: dict[int, dict[int, int]]  # pool -> nodes one class needs by its fit -> how many classes
    caps: list[tuple[float, float, float]]
    node_cost: list[float]
    max_nodes: list[float]
    keep: dict[int, dict[int, float]]  # class -> pool -> replicas running there now
    kept: float = 0.0
    _fit: dict[int, dict[int, float]] = field(default_factory=dict)
    _rep: dict[int, dict[int, float]] = field(default_factory=dict)
    _large: dict[int, dict[int, list[float]]] = field(default_factory=dict)

    @classmethod
    def of(cls, mi: ModelInput, x: ClassPlacement) -> _Placed:
        keep: dict[int, dict[int, float]] = {}
        for c, p, r in zip(mi.keep_class.tolist(), mi.keep_pool.tolist(), mi.keep_cur.tolist(), strict=True):
            keep.setdefault(c, {})[p] = r
        caps = list(zip(mi.vcpus.tolist(), mi.mem.tolist(), np.maximum(mi.gpus, 1e-12).tolist(), strict=True))
        empty: list[ClassPools] = [{} for _ in mi.classes]
        out = cls(mi, empty, {}, {}, {}, {}, caps, mi.node_cost.tolist(), mi.max_nodes.tolist(), keep)
        pairs = np.array(list(x), dtype=np.int64).reshape(-1, 2)
        fit = np.maximum(mi.fit(pairs[:, 0], pairs[:, 1])[0], 1e-9).tolist()  # one call for all
        large = mi.large_weights(pairs[:, 0], pairs[:, 1]).tolist()
        placed: dict[int, ClassPools] = {}
        for ((c, p), r), f, w in zip(x.items(), fit, large, strict=True):
            placed.setdefault(c, {})[p] = r
            out._fit.setdefault(c, {})[p] = f
            out._large.setdefault(c, {})[p] = w
            out._rep.setdefault(c, {})[p] = float(mi.classes[c].rep_cost[int(np.searchsorted(mi.classes[c].cand, p))])
        for c, pools in placed.items():
            out.put(c, pools)
            out.kept += out._kept_of(c, pools)
        return out

    def fits(self, c: int, pools: Iterable[int]) -> dict[int, float]:
        """Class c's fit (and replica cost) on `pools`, computed once per pair: a class has
        thousands of candidates, of which a start touches a few."""
        fit = self._fit.setdefault(c, {})
        new = [p for p in pools if p not in fit]
        if new:
            cl = self.mi.classes[c]
            at = np.array(new, dtype=np.int64)
            values = np.maximum(self.mi.fit(np.full(len(at), c), at)[0], 1e-9).tolist()
            weights = self.mi.large_weights(np.full(len(at), c), at).tolist()
            reps = cl.rep_cost[np.searchsorted(cl.cand, at)].tolist()
            rep, large = self._rep.setdefault(c, {}), self._large.setdefault(c, {})
            for p, f, w, r in zip(new, values, weights, reps, strict=True):
                fit[p] = f
                large[p] = w
                rep[p] = r
        return fit

    def rep_cost(self, c: int, pools: ClassPools) -> float:
        rep = self._rep[c]  # every pool a class is given has been through fits
        return sum(r * rep[p] for p, r in pools.items())

    def nodes(self, p: int) -> int:
        """As class_nodes counts them."""
        if p not in self.on_pool:
            return 0
        ld, cap = self.load[p], self.caps[p]
        agg = math.ceil(max(ld[0] / cap[0], ld[1] / cap[1], ld[2] / cap[2]) - 1e-9)
        large = math.ceil(max(self.large[p], default=0.0) - 1e-9)
        return max(1, agg, max(self.needs[p]), large)

    def put(self, c: int, pools: ClassPools) -> None:
        cpu, mem, gpu = self.mi.classes[c].demand.tolist()
        fits, weights = self._fit[c], self._large[c]  # every pool a class is given has been through fits
        for p, r in self.by_class[c].items():
            ld, need, big = self.load[p], self.needs[p], self.large[p]
            n = math.ceil(r / fits[p] - 1e-9)
            need[n] -= 1
            if not need[n]:
                del need[n]
            del self.on_pool[p][c]
            if not self.on_pool[p]:
                del self.on_pool[p], self.load[p], self.needs[p], self.large[p]
            else:
                ld[0] -= r * cpu
                ld[1] -= r * mem
                ld[2] -= r * gpu
                for j, w in enumerate(weights[p]):
                    big[j] -= r * w
        for p, r in pools.items():
            ld = self.load.setdefault(p, [0.0, 0.0, 0.0])
            ld[0] += r * cpu
            ld[1] += r * mem
            ld[2] += r * gpu
            big = self.large.setdefault(p, [0.0] * self.mi.large_kinds)
            for j, w in enumerate(weights[p]):
                big[j] += r * w
            self.on_pool.setdefault(p, {})[c] = r
            need = self.needs.setdefault(p, {})
            n = math.ceil(r / fits[p] - 1e-9)
            need[n] = need.get(n, 0) + 1
        self.by_class[c] = dict(pools)

    def _kept_of(self, c: int, pools: ClassPools) -> float:
        return sum(min(float(pools.get(p, 0)), r) for p, r in self.keep.get(c, {}).items())

    def pool_costs(self, pools: Sequence[int]) -> float:
        return sum(self.nodes(p) * self.node_cost[p] for p in pools)

    def over_owned(self, pools: Sequence[int]) -> bool:
        return any(self.nodes(p) > self.max_nodes[p] for p in pools)

    def _cost(self, pools: Sequence[int], comp: Sequence[int], pairs: Sequence[tuple[int, int, float]]) -> float:
        """Nodes of `pools`, replica costs and egress of the component `comp` (pairs: its traffic
        in its own indices)."""
        mi = self.mi
        value = self.pool_costs(pools) + sum(self.rep_cost(c, self.by_class[c]) for c in comp)
        frac: list[dict[int, float]] = []
        for c in comp:
            f: dict[int, float] = {}
            for p, r in self.by_class[c].items():
                s = int(mi.site_idx[p])
                f[s] = f.get(s, 0.0) + r / mi.classes[c].replicas
            frac.append(f)
        return value + mi.cost_weight * costs.routed_egress(frac, pairs, mi.egress)

    def delta(
        self, moved: dict[int, ClassPools], comp: Sequence[int], pairs: Sequence[tuple[int, int, float]]
    ) -> float | None:
        """The exact change of the placement's cost if the component's classes took `moved`
        (the others of it staying), None when it breaks owned capacity or the cap on moves."""
        mi = self.mi
        old = {c: self.by_class[c] for c in moved}
        pools = sorted({p for c in moved for p in (*old[c], *moved[c])})
        before = self._cost(pools, comp, pairs)
        kept = self.kept + sum(self._kept_of(c, moved[c]) - self._kept_of(c, old[c]) for c in moved)
        for c, pools_c in moved.items():
            self.put(c, pools_c)
        try:
            if self.over_owned(pools):
                return None
            if mi.max_moves is not None and kept < mi.current_total - mi.max_moves - 1e-9:
                return None
            after = self._cost(pools, comp, pairs)
        finally:
            for c, pools_c in old.items():
                self.put(c, pools_c)
        return after - before + mi.move_cost * (self.kept - kept)

    def apply(self, moved: dict[int, ClassPools]) -> None:
        for c, pools_c in moved.items():
            self.kept += self._kept_of(c, pools_c) - self._kept_of(c, self.by_class[c])
            self.put(c, pools_c)

    def placement(self) -> ClassPlacement:
        return {(c, p): r for c, pools in enumerate(self.by_class) for p, r in pools.items()}


def _share(mi: ModelInput, c: int) -> FloatArray:
    """What a replica of class c costs on each of its candidates, on a node shared at full use."""
    cl = mi.classes[c]
    out: FloatArray = mi.node_share(cl.cand, cl.demand) + cl.rep_cost
    return out


def _site_costs(mi: ModelInput, c: int) -> FloatArray:
    """Per site: what class c's replicas cost there at their shares, spot within its cap
    (inf where it may not run)."""
    cl = mi.classes[c]
    share = _share(mi, c)
    site = mi.site_idx[cl.cand]
    spot = mi.cap_idx[cl.cand] == SPOT
    any_ = np.full(mi.n_sites, np.inf)
    np.minimum.at(any_, site, share)
    other = np.full(mi.n_sites, np.inf)
    np.minimum.at(other, site[~spot], share[~spot])
    on_spot = cl.replicas if cl.spot_cap is None else min(cl.spot_cap, cl.replicas)
    with np.errstate(invalid="ignore"):
        out: FloatArray = on_spot * any_ + (cl.replicas - on_spot) * np.where(cl.replicas > on_spot, other, 0.0)
    return np.where(np.isnan(out), np.inf, out)


def _fallback(mi: ModelInput, at: FloatArray, sends: float, receives: float) -> tuple[FloatArray, IntArray]:
    """Per site s: where class c runs best when its peers are at s (its compute there plus its
    traffic to s), and that cost."""
    eg = np.asarray(mi.egress, dtype=float)
    total = at[:, None] + sends * eg + receives * eg.T  # [its site t, peers' site s]
    best = np.argmin(total, axis=0)
    return total[best, np.arange(mi.n_sites)], best


@dataclass(frozen=True)
class _Member:
    """A component member's estimates: its cost per site at full use (inf where it may not run),
    per site s where it runs best when its peers are at s, and its candidates by site."""

    at: FloatArray
    beside: IntArray
    beside_cost: FloatArray
    share: FloatArray  # per candidate: a replica's cost on a node shared at full use
    by_site: IntArray  # candidate positions ordered by site
    site_start: IntArray  # site s's candidates: by_site[site_start[s] : site_start[s + 1]]

    def here(self, s: int) -> IntArray:
        return self.by_site[self.site_start[s] : self.site_start[s + 1]]


def _members(mi: ModelInput, comp: Sequence[int], sends: FloatArray, receives: FloatArray) -> dict[int, _Member]:
    out: dict[int, _Member] = {}
    for c in comp:
        at = _site_costs(mi, c)
        cost, beside = _fallback(mi, at, float(sends[c]), float(receives[c]))
        site = mi.site_idx[mi.classes[c].cand]
        by_site = np.argsort(site, kind="stable")
        start = np.searchsorted(site[by_site], np.arange(mi.n_sites + 1))
        out[c] = _Member(at, beside, cost, _share(mi, c), by_site, start)
    return out


def _sites_to_try(mi: ModelInput, st: _Placed, comp: dict[int, _Member], n: int, paid: float) -> list[int]:
    """Of the sites where the component's compute plus egress is estimated cheapest and those
    where its members run now, the n cheapest by that estimate that are estimated below what it
    costs now (its replicas at their shares plus the egress it pays)."""
    est = np.zeros(mi.n_sites)
    now = paid
    for c, m in comp.items():
        est += np.where(np.isfinite(m.at), m.at, m.beside_cost)
        cand = mi.classes[c].cand
        for p, r in st.by_class[c].items():
            now += r * float(m.share[int(np.searchsorted(cand, p))])
    here = {int(mi.site_idx[p]) for c in comp for p in st.by_class[c]}
    sites = np.union1d(np.argsort(est, kind="stable")[:n], np.array(sorted(here), dtype=np.int64))
    sites = sites[est[sites] < now]
    return [int(s) for s in sites[np.argsort(est[sites], kind="stable")[:n]]]


def _component_at(mi: ModelInput, st: _Placed, comp: dict[int, _Member], s: int) -> dict[int, ClassPools] | None:
    """Each member at site s, or where it runs best beside peers at s; the biggest first, each at
    its cheapest option given those placed before it. None when a member cannot be placed."""
    moved: dict[int, ClassPools] = {}
    old = {c: st.by_class[c] for c in comp}
    order = sorted(comp, key=lambda c: -float(mi.classes[c].replicas * mi.classes[c].demand[0]))
    try:
        for c in order:
            m = comp[c]
            target = s if np.isfinite(m.at[s]) else int(m.beside[s])
            if not np.isfinite(m.at[target]):
                return None
            pools = _class_at(mi, st, c, m, target)
            if pools is None:
                return None
            moved[c] = pools
            st.put(c, pools)  # the next members see its nodes
    finally:
        for c, pools in old.items():
            st.put(c, pools)
    return moved


def _class_at(mi: ModelInput, st: _Placed, c: int, m: _Member, s: int) -> ClassPools | None:
    """Class c's replicas brought to site s, keeping its rules: a spread class keeps a slot at
    enough of its other sites, a spot cap bounds its replicas on spot. Of a few pool choices at s
    (cheapest at full use, cheapest as whole nodes, pools already open there), the one that adds
    least to the placement's node and replica costs."""
    cl = mi.classes[c]
    kept: ClassPools | None = {}
    if cl.min_sites > 1:
        kept = _spread_slots(mi, cl.min_sites, cl.size, st.by_class[c], s)
    here = m.here(s)
    if kept is None or not len(here):
        return None
    n = cl.replicas - sum(kept.values())
    if n <= 0:
        return kept
    spot_kept = sum(r for p, r in kept.items() if mi.cap_idx[p] == SPOT)
    spot_left = n if cl.spot_cap is None else max(cl.spot_cap - spot_kept, 0)
    pools_here = cl.cand[here]
    fit = st.fits(c, pools_here.tolist())
    fits = np.array([fit[p] for p in pools_here.tolist()])
    share = m.share[here]
    whole = mi.node_cost[pools_here] * np.ceil(n / np.maximum(np.floor(fits + 1e-9), 1.0)) / n + cl.rep_cost[here]
    spot = mi.cap_idx[pools_here] == SPOT
    open_ = np.array([p in st.on_pool for p in pools_here.tolist()], dtype=bool)
    options: dict[int, bool] = {}  # pool -> on spot
    for mask in (~spot, spot):
        for key in (share, whole, np.where(open_, share, np.inf)):
            idx = np.flatnonzero(mask & np.isfinite(key))
            if len(idx):
                i = int(idx[np.argmin(key[idx])])
                options[int(pools_here[i])] = bool(spot[i])
    off_spot = [p for p, on in options.items() if not on]
    choices: list[ClassPools] = [{p: n} for p in off_spot]
    for p, on in options.items():
        if on and spot_left:
            on_spot = min(n, spot_left)
            rest = n - on_spot
            choices += [{p: on_spot, q: rest} for q in off_spot] if rest else [{p: on_spot}]
    best: tuple[float, ClassPools] | None = None
    for ch in choices:
        pools = dict(kept)
        for q, r in ch.items():
            pools[q] = pools.get(q, 0) + r
        if cl.min_sites > 1 and not _spread_kept(mi, cl.min_sites, cl.size, pools):
            continue
        value = _added_cost(st, c, pools)
        if value is not None and (best is None or value < best[0]):
            best = (value, pools)
    return best[1] if best is not None else None


def _spread_kept(mi: ModelInput, min_sites: int, size: int, pools: ClassPools) -> bool:
    """Whether a class's replicas per pool reach min_sites * size distinct-site slots."""
    at_site: dict[int, int] = {}
    for p, r in pools.items():
        t = int(mi.site_idx[p])
        at_site[t] = at_site.get(t, 0) + r
    return sum(min(r, size) for r in at_site.values()) >= min_sites * size


def _spread_slots(mi: ModelInput, min_sites: int, size: int, cur: ClassPools, s: int) -> ClassPools | None:
    """Replicas a spread class keeps off site s: up to `size` at each of its other sites, the
    fullest first, until with a slot at s it reaches min_sites * size distinct-site slots."""
    at_site: dict[int, list[tuple[int, int]]] = {}
    for p, r in cur.items():
        t = int(mi.site_idx[p])
        if t != s:
            at_site.setdefault(t, []).append((p, r))
    need = (min_sites - 1) * size
    kept: ClassPools = {}
    for _t, pools in sorted(at_site.items(), key=lambda kv: -sum(r for _p, r in kv[1])):
        if need <= 0:
            break
        take = min(size, need, sum(r for _p, r in pools))
        need -= take
        for p, r in sorted(pools, key=lambda pr: -pr[1]):
            k = min(r, take)
            kept[p] = k
            take -= k
            if take == 0:
                break
    return kept if need <= 0 else None


def _added_cost(st: _Placed, c: int, pools: ClassPools) -> float | None:
    """What class c taking `pools` adds to the node and replica costs of the pools it touches
    (None when it needs more nodes than a pool owns)."""
    old = st.by_class[c]
    touched = sorted({*old, *pools})
    before = st.pool_costs(touched) + st.rep_cost(c, old)
    st.put(c, pools)
    try:
        if st.over_owned(touched):
            return None
        after = st.pool_costs(touched) + st.rep_cost(c, pools)
    finally:
        st.put(c, old)
    return after - before
