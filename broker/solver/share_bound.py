"""The LP-free lower bound, for when column generation cannot finish in time.

Split each node's cost over its cpu and memory, a share lam_p to cpu, per pool: adding pool
p's capacity rows weighted lam_p cost_p / vcpus_p and (1 - lam_p) cost_p / mem_p (Lagrangian
multipliers >= 0: valid for every lam in [0, 1]^P) leaves the node columns at cost 0 and
prices a replica of class c on pool p at

    each_cp = rep_cost_cp + cost_p (lam_p d_cpu / vcpus_p + (1 - lam_p) d_mem / mem_p),

so the classes separate. A GPU node first hands a share of its cost to its GPUs (`_gpu_share`,
a multiplier on the GPU rows: a GPU replica pays for its GPUs, not a cpu/memory sliver of the
node) and splits the rest (300 workloads: 124.2 -> 127.0 $/h; 3,000: 1,300 -> 1,318.6; 20,000:
8,381 -> 8,489). Per class, with the demand, spot and spread rows kept:
- R_c replicas cost at least R_c min_p each_cp;
- a spot cap keeps all but `spot_cap` of them on non-spot pools;
- spread (sum_s min(x_s, K) >= m K) keeps (m - 1) K of them off the cheapest site.

Egress (given the layout's egress columns): a class k that sends traffic to v pays, per site s
it leaves from, at least e_ks (f_s - g_s)^+ (f, g: the two classes' shares of replicas per site;
e_ks the cheapest rate out of s: within the cloud where v may run at another of its sites).
At the best split found, the classes in dependency pairs are priced together by one small LP
over their kept rows: replicas per (class, site, spot or not) at that segment's cheapest column,
demand, spot caps, spread (z_cs <= x_c(s), z_cs <= K_c, sum_s z_cs >= m_c K_c) and the egress
rows x_k(s)/R_k - x_v(s)/R_v <= u_ks at e_ks. It is a relaxation of those classes' part of the
Lagrangian at that split, so its optimum replaces their floors (3,000 workloads: +5.2 $/h where
the floors of a matching of pairs, each class in one pair, added 3.75).

The best single split for all pools is found by golden-section search (the plain total is
concave in it); from there each pool's own split is moved by L-BFGS-B on the floors smoothed
by softmins (`_smoothed_ascent`), and the best split seen gives the bound. On big requests
relaxed_bound.py hands it better prices to start from: the duals of its relaxation's LP
(`DualPrices`).
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.optimize import linprog, minimize
from scipy.sparse.csgraph import connected_components

from broker.core.pooltable import CAPACITY_TYPES, BoolArray, FloatArray, IntArray
from broker.solver.classes import SPOT, WorkloadClass
from broker.solver.model import Index, Layout, ModelInput, ranges

Float32Array = npt.NDArray[np.float32]

GOLDEN_STEPS = 8
CHUNK = 1 << 20  # columns evaluated at once: no array as long as the columns but the data
# the smoothed ascent (_smoothed_ascent): softmin temperature per class, relative to its cheapest
# price per replica (0.003 and 0.03 did worse at 3,000 workloads), lowered when a round gains
# less than STALL; how far a round may move each pool's split; L-BFGS-B iterations per round
TEMPERATURE, MIN_TEMPERATURE, STALL = 0.01, 0.00001, 2e-5
TRUST, MAX_TRUST, MIN_TRUST = 0.2, 0.3, 1e-4
ROUND_ITERATIONS = 30
ROUNDS = 100
NEAR = 5.0  # a column joins a round's smoothed terms within this many temperatures of their minimum
# the egress LP's time is kept out of the ascent's budget (3,000 workloads: 0.7 s for 13.2k egress columns)
EGRESS_S_PER_COL = 1e-4
LP_CHUNK = 20_000


@dataclass(frozen=True)
class EgressColumns:
    """The layout's egress columns: class k's traffic to v leaving site s costs `cost` per unit
    of k's share of replicas at s that v does not match there."""

    k: IntArray
    v: IntArray
    site: IntArray
    cost: FloatArray

    @classmethod
    def of(cls, lay: Layout) -> EgressColumns:
        """The layout's egress columns at the cheapest rate their traffic can leave at: within
        the cloud (a near column) where v may run at another site of it, else the far price.
        The far price alone overstated the floor of a pair whose peer may run in the same
        cloud (3,000 workloads: 1,325.2 vs 1,322.1 $/h)."""
        cost = lay.e_cost.copy()
        np.minimum.at(cost, lay.near_e, lay.near_cost)
        return cls(lay.e_class, lay.e_peer, lay.e_site, cost)


@dataclass(frozen=True)
class DualPrices:
    """Capacity prices for the pools of an LP (relaxed_bound.py), from its duals: per unit of cpu,
    memory and GPU, and what they leave of a node's cost (`slack`), split over cpu and memory as
    elsewhere. Any prices >= 0 that charge no more than a node costs are as valid as a split."""

    unit: FloatArray  # (n_pools, 3); 0 for pools not in the LP
    slack: FloatArray  # per pool: the node cost left to split; NaN for pools not in the LP

    @classmethod
    def of(cls, mi: ModelInput, pools: IntArray, unit: FloatArray) -> DualPrices:
        """From the capacity rows' duals (`unit`, per pool of `pools`), scaled down where, by
        solver tolerances, they would charge more than the node costs."""
        unit = np.maximum(unit, 0.0)
        paid = (unit * np.stack([mi.vcpus[pools], mi.mem[pools], mi.gpus[pools]], axis=1)).sum(axis=1)
        cost = mi.node_cost[pools]
        scale = np.minimum(1.0, cost / np.maximum(paid, 1e-300))
        full = np.zeros((mi.n_pools, 3))
        full[pools] = unit * scale[:, None]
        slack = np.full(mi.n_pools, np.nan)
        slack[pools] = np.maximum(cost - paid * scale, 0.0)
        return cls(full, slack)


@dataclass
class _Columns:
    """The (class, pool) columns that can be the cheapest of their segment at some split.

    Columns are ordered by class, then segment: a segment is a class's columns at one site
    (spread classes; one segment for all sites otherwise) and of one kind, spot or not (classes
    with a spot cap). A group is a class's segments at one site."""

    pool: Index  # 32-bit
    # each column's price with its pool's split all on memory (lam = 0) and all on cpu (lam = 1),
    # in float32 rounded down: prices only fall, so every floor stays valid (20,000 workloads:
    # 146 MB less for 18.2 M columns); each = at_mem + lam[pool] (at_cpu - at_mem)
    at_mem: Float32Array
    at_cpu: Float32Array
    seg_bound: IntArray  # per segment: its first column; then the number of columns
    chunks: IntArray  # first segment of each chunk of about CHUNK columns; then the number of segments
    seg_class: IntArray
    seg_group: IntArray
    seg_spot: BoolArray
    group_start: IntArray  # per group: its first segment
    group_class: IntArray
    group_site: IntArray  # -1 for classes not split by site
    class_seg: IntArray  # per class: its first segment
    class_group: IntArray  # per class: its first group
    replicas: FloatArray  # per class
    spot_cap: FloatArray  # spot replicas allowed (= replicas without a cap)
    off: FloatArray  # replicas kept off the cheapest site (0 without spread)
    n_pools: int


@dataclass
class _Point:
    """The floors at one split."""

    value: float
    floor: FloatArray  # per class
    seg_min: FloatArray
    low: FloatArray  # per class: cheapest column
    nonspot: FloatArray  # cheapest non-spot column
    other: FloatArray  # cheapest column off the cheapest column's site
    first_group: IntArray  # the group of the cheapest column
    choice: IntArray  # which floor holds: 0 plain, 1 spot cap, 2 spread


def simple_bound(
    mi: ModelInput,
    *,
    time_budget_s: float = math.inf,
    rounds: int = ROUNDS,
    egress: EgressColumns | None = None,
    duals: DualPrices | None = None,
    start: FloatArray | None = None,
    stop: threading.Event | None = None,
) -> float:
    """Sum of the classes' floors at the best per-pool cpu/memory split found within the time
    budget (rounds=0: the best single split), plus what the dependency pairs' egress adds at
    that split; every split gives a valid bound. `duals` price the pools of an LP (what they
    leave is split), `start` is the split to climb from (else the best single split); the ascent
    ends early once `stop` is set."""
    started = time.perf_counter()
    paired = np.zeros(len(mi.classes), dtype=bool)
    if egress is not None and len(egress.k):
        paired[egress.k] = paired[egress.v] = True
    cols = _columns(mi, paired, duals)
    lam = start if start is not None else _best_global_split(cols)[0]
    egress_s = EGRESS_S_PER_COL * (len(egress.k) if egress is not None else 0)
    point = _smoothed_ascent(cols, lam, started + time_budget_s - egress_s, rounds, stop)
    best = point.value
    if paired.any() and egress is not None:
        left = max(time_budget_s - (time.perf_counter() - started), egress_s)
        best += _egress_gain(mi, cols, point, egress, left)
    return best


def _smoothed_ascent(
    cols: _Columns, lam: FloatArray, deadline: float, rounds: int, stop: threading.Event | None = None
) -> _Point:
    """The floors at the best split found by maximising smoothed floors from `lam`.

    The sum of floors is concave in the splits but not smooth: each floor is a minimum over
    columns. Replaced by a softmin (temperature per class, relative to its price), it is smooth
    and L-BFGS-B climbs it far faster than subgradient steps did (3,000 workloads in 10 s:
    1,321.8 $/h where the steps reached 1,320.2; 20,000 in 30 s: 8,516 vs 8,508; 300 workloads:
    127.39 vs 127.05, the exact optimum of this relaxation 127.50). Each round moves every
    pool's split at most `trust` from the best split so far, so only the columns that could come
    near their term's minimum within that box enter the softmin (~0.4 M of 3.0 M at 3,000
    workloads); the floors themselves are always evaluated over every column, so whatever the
    smoothing does, the bound stays valid. A round that does not raise the floors halves the box
    and the temperature, one that raises them little halves the temperature."""
    best_pt, best_lam = _evaluate(cols, lam), lam
    trust, temperature = TRUST, TEMPERATURE
    for _ in range(rounds):
        if time.perf_counter() >= deadline or trust < MIN_TRUST or (stop is not None and stop.is_set()):
            break
        smooth = _Smoothed(cols, best_pt, best_lam, trust, temperature)
        lam = smooth.maximise(best_lam, trust, deadline, stop)
        pt = _evaluate(cols, lam)
        if pt.value > best_pt.value:
            if pt.value < best_pt.value + STALL * abs(best_pt.value):
                temperature = max(temperature / 2, MIN_TEMPERATURE)
            best_pt, best_lam, trust = pt, lam, min(1.5 * trust, MAX_TRUST)
        else:
            trust /= 2
            temperature = max(temperature / 2, MIN_TEMPERATURE)
    return best_pt


class _Smoothed:
    """The floors at `pt`'s choices, each minimum replaced by a softmin over the columns that
    could come near it while every split stays within `trust` of `lam`: the cheapest column
    (weighted by the replicas the floor prices there), and for the spot cap and spread floors
    the cheapest non-spot column and the cheapest off the first site."""

    def __init__(self, cols: _Columns, pt: _Point, lam: FloatArray, trust: float, temperature: float) -> None:
        tau = temperature * np.maximum(np.abs(pt.low), 1e-12)
        near = _near_columns(cols, pt, lam, trust, NEAR * tau)
        seg = np.searchsorted(cols.seg_bound, near, side="right") - 1
        cls = cols.seg_class[seg]
        # float32 is enough here: only the floors' evaluation has to be exact
        self.pool, self.base = cols.pool[near], cols.at_mem[near]
        self.slope = cols.at_cpu[near] - self.base
        self.n_pools = cols.n_pools
        r, cap, off = cols.replicas, cols.spot_cap, cols.off
        # int32 positions, in-place arithmetic and terms of at most about CHUNK columns: at
        # 20,000 workloads ~3.4 M columns are near
        self.terms: list[tuple[slice | Index, Index, Index, FloatArray, FloatArray]] = []
        for coef, on in (
            (np.choose(pt.choice, [r, cap, r - off]), None),
            (np.where(pt.choice == 1, r - cap, 0.0), ~cols.seg_spot[seg]),
            (np.where(pt.choice == 2, off, 0.0), cols.seg_group[seg] != pt.first_group[cls]),
        ):
            positive = coef[cls] > 0
            idx = np.flatnonzero(positive if on is None else on & positive).astype(np.int32)
            if not len(idx):
                continue
            start = _changes(cls[idx])
            # each class's cheapest column is near, so the first term covers every near column
            whole = len(idx) == len(near)
            cuts = np.unique(np.searchsorted(start, np.arange(0, len(idx), CHUNK), side="right") - 1)
            for t0, t1 in itertools.pairwise([*cuts.tolist(), len(start)]):
                a, b = int(start[t0]), int(start[t1]) if t1 < len(start) else len(idx)
                part = start[t0:t1] - a
                owner = np.repeat(np.arange(len(part), dtype=np.int32), np.diff(np.r_[part, b - a]))
                c = cls[idx[start[t0:t1]]]
                self.terms.append((slice(a, b) if whole else idx[a:b], part, owner, coef[c], 1.0 / tau[c]))

    def __call__(self, lam: FloatArray) -> tuple[float, FloatArray]:
        """Minus the smoothed floors and their gradient in the splits (for a minimiser)."""
        each = lam[self.pool]
        each *= self.slope
        each += self.base
        weight = np.zeros(len(each))
        total = 0.0
        for sel, start, owner, coef, inv_tau in self.terms:
            e = each[sel]
            low = np.minimum.reduceat(e, start)
            z = low[owner]
            z -= e
            z *= inv_tau[owner]
            np.exp(z, out=z)  # in (0, 1]: no overflow
            mass = np.add.reduceat(z, start)
            total += float(coef @ (low - np.log(mass) / inv_tau))
            z *= (coef / mass)[owner]
            weight[sel] += z
        weight *= self.slope
        grad = np.bincount(self.pool, weights=weight, minlength=self.n_pools).astype(np.float64)
        return -total, -grad

    def maximise(
        self, lam: FloatArray, trust: float, deadline: float, stop: threading.Event | None = None
    ) -> FloatArray:
        """L-BFGS-B within the box, stopped at the deadline (or `stop`) with the split it had reached."""
        reached = [lam]

        def stop_at_deadline(x: FloatArray) -> None:
            reached.append(x.copy())
            if time.perf_counter() >= deadline or (stop is not None and stop.is_set()):
                raise StopIteration

        box = np.c_[np.maximum(lam - trust, 0.0), np.minimum(lam + trust, 1.0)]
        try:
            res = minimize(
                self, lam, jac=True, method="L-BFGS-B", bounds=box, callback=stop_at_deadline,
                options={"maxiter": ROUND_ITERATIONS},
            )  # fmt: skip
        except StopIteration:
            return reached[-1]
        out: FloatArray = res.x
        return out


def _near_columns(cols: _Columns, pt: _Point, lam: FloatArray, trust: float, margin: FloatArray) -> IntArray:
    """The columns whose price, with every split within `trust` of `lam`, can come within
    `margin` (per class) of the minimum their floor's term takes there; a chunk at a time."""
    n_segs = len(cols.seg_bound) - 1
    seg_high = np.empty(n_segs)  # the most each segment's cheapest column can cost in the box
    for s0, s1, c0, c1 in _chunks(cols):
        each, slope = _prices(cols, lam, c0, c1)
        each += trust * np.abs(slope)
        seg_high[s0:s1] = np.minimum.reduceat(each, cols.seg_bound[s0:s1] - c0)
    group_high = np.minimum.reduceat(seg_high, cols.group_start)
    low = np.minimum.reduceat(group_high, cols.class_group)
    nonspot = np.minimum.reduceat(np.where(cols.seg_spot, np.inf, seg_high), cols.class_seg)
    group_high[pt.first_group] = np.inf
    other = np.minimum.reduceat(group_high, cols.class_group)
    high = (np.choose(pt.choice, [low, nonspot, other]) + margin)[cols.seg_class]
    near: list[IntArray] = []
    for s0, s1, c0, c1 in _chunks(cols):
        each, slope = _prices(cols, lam, c0, c1)
        each -= trust * np.abs(slope)
        limit = np.repeat(high[s0:s1], np.diff(cols.seg_bound[s0 : s1 + 1]))
        near.append(c0 + np.flatnonzero(each <= limit))
    return np.concatenate(near)


def _prices(cols: _Columns, lam: FloatArray, c0: int, c1: int) -> tuple[FloatArray, FloatArray]:
    """The prices of columns c0:c1 at the split `lam`, and their slopes in it (float64)."""
    at_mem = cols.at_mem[c0:c1].astype(np.float64)
    slope = cols.at_cpu[c0:c1] - at_mem
    return lam[cols.pool[c0:c1]] * slope + at_mem, slope


def _chunks(cols: _Columns) -> list[tuple[int, int, int, int]]:
    """(first segment, end segment, first column, end column) of each chunk."""
    return [
        (int(s0), int(s1), int(cols.seg_bound[s0]), int(cols.seg_bound[s1]))
        for s0, s1 in zip(cols.chunks[:-1], cols.chunks[1:], strict=True)
    ]


def _egress_gain(
    mi: ModelInput, cols: _Columns, pt: _Point, egress: EgressColumns, time_limit_s: float = math.inf
) -> float:
    """What the dependency pairs' egress adds to the sum of floors (module docstring): the LP of
    the paired classes' kept rows at this split, less their floors. Its blocks are the
    components of the dependency graph, so a class in several pairs counts once in each row
    it is in, never twice. The components are solved in LPs of about LP_CHUNK variables: one
    LP for all held 0.6 GB in HiGHS at 20,000 workloads. A chunk whose LP does not finish
    within the time limit adds nothing."""
    deadline = time.perf_counter() + time_limit_s
    classes = np.unique(np.r_[egress.k, egress.v])
    ki, vi = np.searchsorted(classes, egress.k), np.searchsorted(classes, egress.v)
    n = len(classes)
    _, comp = connected_components(sp.coo_matrix((np.ones(len(ki)), (ki, vi)), shape=(n, n)), directed=False)
    size = np.bincount(comp, weights=_segments_per_class(cols)[classes]) + np.bincount(
        comp[ki], minlength=comp.max() + 1
    )
    chunk = (np.cumsum(size) - size) // LP_CHUNK
    total = 0.0
    for c in np.unique(chunk).tolist():
        mine = chunk[comp[ki]] == c
        sub = EgressColumns(egress.k[mine], egress.v[mine], egress.site[mine], egress.cost[mine])
        total += _pairs_gain(mi, cols, pt, sub, deadline - time.perf_counter())
    return total


def _segments_per_class(cols: _Columns) -> IntArray:
    out: IntArray = np.diff(np.r_[cols.class_seg, len(cols.seg_class)])
    return out


def _pairs_gain(mi: ModelInput, cols: _Columns, pt: _Point, egress: EgressColumns, time_limit_s: float) -> float:
    """The LP of the classes in `egress`'s pairs at this split less their floors (0 if it does not finish)."""
    if time_limit_s <= 0:
        return 0.0
    classes = np.unique(np.r_[egress.k, egress.v])
    seg = ranges(cols.class_seg[classes], _segments_per_class(cols)[classes])
    seg = seg[np.isfinite(pt.seg_min[seg])]
    cls = cols.seg_class[seg]
    site = cols.group_site[cols.seg_group[seg]]
    n_x, n_e = len(seg), len(egress.k)
    ns = mi.n_sites
    # x: replicas per (class, site, spot or not) segment at its cheapest column; u: egress shares
    key = cls * ns + site
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]

    def at(c: IntArray, s: IntArray) -> tuple[IntArray, IntArray]:
        """(row number, x column) of every x of class c[i] at site s[i]."""
        lo = np.searchsorted(sorted_key, c * ns + s)
        hi = np.searchsorted(sorted_key, c * ns + s, side="right")
        return np.repeat(np.arange(len(c)), hi - lo), order[ranges(lo, hi - lo)]

    rk, rv = cols.replicas[egress.k], cols.replicas[egress.v]
    i_k, x_k = at(egress.k, egress.site)
    i_v, x_v = at(egress.v, egress.site)
    # k's share at s not matched by v's leaves: x_k(s)/R_k - x_v(s)/R_v - u <= 0
    eg_rows = [i_k, i_v, np.arange(n_e)]
    eg_cols = [x_k, x_v, n_x + np.arange(n_e)]
    eg_vals = [1.0 / rk[i_k], -1.0 / rv[i_v], -np.ones(n_e)]
    ub_rows, ub_cols, ub_vals, ub_rhs = (
        [np.concatenate(eg_rows)],
        [np.concatenate(eg_cols)],
        [np.concatenate(eg_vals)],
        [np.zeros(n_e)],
    )
    n_ub = n_e
    capped = classes[cols.spot_cap[classes] < cols.replicas[classes]]
    spot_x = np.flatnonzero(np.isin(cls, capped) & cols.seg_spot[seg])
    if len(capped):  # spot caps
        ub_rows.append(n_ub + np.searchsorted(capped, cls[spot_x]))
        ub_cols.append(spot_x)
        ub_vals.append(np.ones(len(spot_x)))
        ub_rhs.append(cols.spot_cap[capped])
        n_ub += len(capped)
    cost = [pt.seg_min[seg], egress.cost]
    upper = [np.full(n_x + n_e, np.inf)]
    spread = np.array([c for c in classes.tolist() if mi.classes[c].min_sites > 1], dtype=np.int64)
    if len(spread):  # z_cs <= x_c(s), z_cs <= K_c, sum_s z_cs >= m_c K_c
        zc, zs = np.unique(np.c_[cls, site][np.isin(cls, spread)], axis=0).T
        n_z = len(zc)
        i_z, x_z = at(zc, zs)
        z_col = n_x + n_e + np.arange(n_z)
        size = np.array([mi.classes[c].size for c in spread], dtype=np.float64)
        m = np.array([mi.classes[c].min_sites for c in spread], dtype=np.float64)
        ub_rows += [n_ub + np.arange(n_z), n_ub + i_z, n_ub + n_z + np.searchsorted(spread, zc)]
        ub_cols += [z_col, x_z, z_col]
        ub_vals += [np.ones(n_z), -np.ones(len(x_z)), -np.ones(n_z)]
        ub_rhs += [np.zeros(n_z), -m * size]
        n_ub += n_z + len(spread)
        cost.append(np.zeros(n_z))
        upper.append(size[np.searchsorted(spread, zc)])
    c_all = np.concatenate(cost)
    a_ub = sp.csr_matrix(
        (np.concatenate(ub_vals), (np.concatenate(ub_rows), np.concatenate(ub_cols))), shape=(n_ub, len(c_all))
    )
    a_eq = sp.csr_matrix(
        (np.ones(n_x), (np.searchsorted(classes, cls), np.arange(n_x))), shape=(len(classes), len(c_all))
    )
    res = linprog(
        c_all,
        A_ub=a_ub,
        b_ub=np.concatenate(ub_rhs),
        A_eq=a_eq,
        b_eq=cols.replicas[classes],
        bounds=np.c_[np.zeros(len(c_all)), np.concatenate(upper)],
        method="highs",
        options={"time_limit": time_limit_s} if math.isfinite(time_limit_s) else None,
    )
    if res.status != 0:
        return 0.0
    return max(0.0, float(res.fun) - float(pt.floor[classes].sum()))


def _best_global_split(cols: _Columns) -> tuple[FloatArray, float]:
    """Golden-section search for the best single split, as a per-pool start and its value."""

    def total(share: float) -> float:
        return _evaluate(cols, np.full(cols.n_pools, share)).value

    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    lo, hi = 0.0, 1.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = total(a), total(b)
    best = max((fa, a), (fb, b))
    for _ in range(GOLDEN_STEPS - 2):
        if fa < fb:  # the maximum lies right of a
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = total(b)
        else:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = total(a)
        best = max(best, (fa, a), (fb, b))
    return np.full(cols.n_pools, best[1]), best[0]


def _evaluate(cols: _Columns, lam: FloatArray) -> _Point:
    seg_min = _segment_minima(cols, lam)
    group_min = np.minimum.reduceat(seg_min, cols.group_start)
    low = np.minimum.reduceat(group_min, cols.class_group)
    nonspot = np.minimum.reduceat(np.where(cols.seg_spot, np.inf, seg_min), cols.class_seg)
    first_group = _first_of_each(np.flatnonzero(group_min == low[cols.group_class]), cols.group_class)
    group_min[first_group] = np.inf
    other = np.minimum.reduceat(group_min, cols.class_group)

    r, cap, off = cols.replicas, cols.spot_cap, cols.off
    spot_holds = (cap < r) & np.isfinite(nonspot)
    spread_holds = (off > 0) & np.isfinite(other)
    floors = np.stack(
        [
            r * low,
            np.where(spot_holds, cap * low + (r - cap) * np.where(spot_holds, nonspot, 0.0), -np.inf),
            np.where(spread_holds, (r - off) * low + off * np.where(spread_holds, other, 0.0), -np.inf),
        ]
    )
    choice = np.argmax(floors, axis=0)
    floor = np.take_along_axis(floors, choice[None, :], axis=0)[0]
    return _Point(float(floor.sum()), floor, seg_min, low, nonspot, other, first_group, choice)


def _segment_minima(cols: _Columns, lam: FloatArray) -> FloatArray:
    """Each segment's cheapest price, a chunk of segments at a time."""
    seg_min = np.empty(len(cols.seg_bound) - 1)
    for s0, s1, c0, c1 in _chunks(cols):
        each, _ = _prices(cols, lam, c0, c1)
        seg_min[s0:s1] = np.minimum.reduceat(each, cols.seg_bound[s0:s1] - c0)
    return seg_min


def _first_of_each(idx: IntArray, owner: IntArray) -> IntArray:
    """The first of the sorted positions `idx` for each owner among them."""
    own = owner[idx]
    out: IntArray = idx[np.r_[True, own[1:] != own[:-1]]] if len(idx) else idx
    return out


def _columns(mi: ModelInput, paired: BoolArray | None = None, duals: DualPrices | None = None) -> _Columns:
    """Every class's candidate columns, less those no split can make the cheapest of their
    segment (their cheapest share costs more than another's dearest): 3,000 workloads keep
    1.6 M of 14.7 M, 20,000 keep 9.2 M of 70.8 M. Two passes over the classes, so only the
    kept columns' positions are held while the arrays are built."""
    spot_pool = mi.cap_idx == SPOT
    if duals is None:
        gpu_share = _gpu_share(mi)
        split = mi.node_cost * (1.0 - gpu_share)  # what the cpu/memory split shares out
        gpu_price = np.where(mi.gpus > 0, mi.node_cost * gpu_share / np.maximum(mi.gpus, 1e-12), 0.0)
    else:
        # the LP's pools: what their duals leave, GPUs priced by their rows; the rest: the whole
        # node, as the LP's pricing reads it (a GPU share made the other classes' columns on GPU
        # nodes cheaper than the LP's prices: 20 $/h of floors at 3,000 workloads)
        split = np.where(np.isnan(duals.slack), mi.node_cost, duals.slack)
        gpu_price = np.zeros(mi.n_pools)
    cpu_price = split / mi.vcpus
    mem_price = split / mi.mem
    kept: list[Index] = []
    seg_start: list[IntArray] = []
    seg_key: list[IntArray] = []
    size = 0
    sited = np.array([c.min_sites > 1 for c in mi.classes], dtype=bool)
    if paired is not None:
        sited |= paired  # the egress floor needs each site's cheapest column
    for i, c in enumerate(mi.classes):
        cand = c.cand
        cpu = c.demand[0] * cpu_price[cand]
        mem = c.demand[1] * mem_price[cand]
        fixed = c.rep_cost + c.demand[2] * gpu_price[cand]
        if duals is not None:
            fixed += duals.unit[cand] @ c.demand
        key = None  # site * 2 + spot, where the floors need them
        if sited[i] or c.spot_cap is not None:
            key = 2 * mi.site_idx[cand] if sited[i] else np.zeros(len(cand), dtype=np.int64)
            if c.spot_cap is not None:
                key += spot_pool[cand]
        lo, hi = fixed + np.minimum(cpu, mem), fixed + np.maximum(cpu, mem)
        keep, start = _could_be_cheapest(c, key, lo, hi, every_site=paired is not None and bool(paired[i]))
        kept.append(keep.astype(np.int32))
        seg_start.append(start + size)
        seg_key.append(np.zeros(1, dtype=np.int64) if key is None else key[keep[start]])
        size += len(keep)

    pool = np.empty(size, dtype=np.int32)
    at_mem = np.empty(size, dtype=np.float32)
    at_cpu = np.empty(size, dtype=np.float32)
    at = 0
    for c, keep in zip(mi.classes, kept, strict=True):
        on = c.cand[keep]
        fixed = c.rep_cost[keep] + c.demand[2] * gpu_price[on]
        pool[at : at + len(on)] = on
        if duals is not None:
            fixed += duals.unit[on] @ c.demand
        mem, cpu = fixed + c.demand[1] * mem_price[on], fixed + c.demand[0] * cpu_price[on]
        at_mem[at : at + len(on)] = _round_down(mem)
        at_cpu[at : at + len(on)] = _round_down(cpu)
        at += len(on)

    n_segs = np.array([len(s) for s in seg_start])
    starts = np.concatenate(seg_start)
    keys = np.concatenate(seg_key)
    seg_class = np.repeat(np.arange(len(mi.classes)), n_segs)
    group_start = _changes(seg_class, keys // 2)
    group_class = seg_class[group_start]
    classes = mi.classes
    return _Columns(
        pool=pool,
        at_mem=at_mem,
        at_cpu=at_cpu,
        seg_bound=np.r_[starts, size],
        chunks=np.r_[np.unique(np.searchsorted(starts, np.arange(0, size, CHUNK), side="right") - 1), len(starts)],
        seg_class=seg_class,
        seg_group=np.repeat(np.arange(len(group_start)), np.diff(np.r_[group_start, len(starts)])),
        seg_spot=(keys % 2).astype(bool),
        group_start=group_start,
        group_class=group_class,
        group_site=np.where(sited[group_class], keys[group_start] // 2, -1),
        class_seg=np.r_[0, np.cumsum(n_segs)[:-1]],
        class_group=np.searchsorted(seg_class[group_start], np.arange(len(classes))),
        replicas=np.array([c.replicas for c in classes], dtype=np.float64),
        spot_cap=np.array([c.replicas if c.spot_cap is None else c.spot_cap for c in classes], dtype=np.float64),
        off=np.array([min((c.min_sites - 1) * c.size, c.replicas) for c in classes], dtype=np.float64),
        n_pools=mi.n_pools,
    )


def _round_down(x: FloatArray) -> Float32Array:
    """x in float32, rounded towards -inf."""
    y = x.astype(np.float32)
    out: Float32Array = np.where(y > x, np.nextafter(y, np.float32(-np.inf)), y)
    return out


def _gpu_share(mi: ModelInput) -> FloatArray:
    """Per pool, the share of a GPU node's cost its GPUs carry (0 elsewhere): what the node costs
    above the cheapest cover of its cpu and memory by one larger GPU-less pool of its site,
    capacity type and architecture. Split by cpu and memory alone, a GPU replica paid a sliver
    of its node (300 workloads: 4 GPU workloads held 3.1 of the 4.2 $/h between this bound and
    the LP). Any share in [0, 1] is a valid multiplier on the GPU rows; this one keeps each GPU
    node's cpu and memory prices at or above those of that pool, so other classes do not flock
    to it (any cover gave 113.5 $/h at 300 workloads, any of the same architecture 118.4, this
    one 127.0)."""
    gpu = mi.gpus > 0
    out = np.zeros(mi.n_pools)
    if not gpu.any() or not (mi.class_demand[:, 2] > 0).any():
        return out  # nothing to charge: the share would only make GPU nodes cheaper for the rest
    arch = mi.arch_idx if len(mi.arch_idx) else np.zeros(mi.n_pools, dtype=np.int64)
    cell = (mi.site_idx.astype(np.int64) * len(CAPACITY_TYPES) + mi.cap_idx) * (int(arch.max()) + 1) + arch
    order = np.argsort(cell, kind="stable")
    bounds = np.r_[0, np.flatnonzero(np.diff(cell[order])) + 1, len(order)]
    for a, b in itertools.pairwise(bounds.tolist()):
        pools = order[a:b]
        g, q = pools[gpu[pools]], pools[~gpu[pools]]
        if len(g) == 0 or len(q) == 0:
            continue
        # p's cpu and memory on q's nodes, fractionally: c_q max(v_p / v_q, m_p / m_q), only
        # by nodes at least as large (a replica that fits p then fits q)
        cover = mi.node_cost[q] * np.maximum(mi.vcpus[g, None] / mi.vcpus[q], mi.mem[g, None] / mi.mem[q])
        large = (mi.vcpus[q] >= mi.vcpus[g, None]) & (mi.mem[q] >= mi.mem[g, None])
        best = np.where(large, cover, np.inf).min(axis=1)
        cost = mi.node_cost[g]
        share = np.where((cost > 0) & np.isfinite(best), 1.0 - best / np.where(cost > 0, cost, 1.0), 0.0)
        out[g] = np.clip(share, 0.0, 1.0)
    return out


def _could_be_cheapest(
    c: WorkloadClass, key: IntArray | None, lo: FloatArray, hi: FloatArray, *, every_site: bool = False
) -> tuple[IntArray, IntArray]:
    """The columns, ordered by segment, whose cheapest share (`lo`, over every split) is within
    the dearest share (`hi`) of the best column of their segment, and where each segment
    starts; for spread alone, only sites that could be among the two cheapest matter (unless
    `every_site`: the egress floor reads every site's cheapest column)."""
    if key is None:
        return np.flatnonzero(lo <= _slack(hi.min(keepdims=True))), np.zeros(1, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    start = _changes(key[order])
    slack = _slack(np.minimum.reduceat(hi[order], start))
    seg = np.repeat(np.arange(len(start)), np.diff(np.r_[start, len(key)]))
    keep = lo[order] <= slack[seg]
    if c.min_sites > 1 and c.spot_cap is None and len(start) > 2 and not every_site:  # segments are sites here
        site_lo = np.minimum.reduceat(lo[order], start)
        keep &= (site_lo <= np.partition(slack, 1)[1])[seg]
    seg = seg[keep]
    return order[keep], _changes(seg)


def _slack(hi: FloatArray) -> FloatArray:
    """A dearest share plus rounding: what the test keeps may only grow."""
    out: FloatArray = hi + 1e-9 * np.abs(hi) + 1e-12
    return out


def _changes(*keys: IntArray) -> IntArray:
    """Positions where any of the sorted keys changes (and 0)."""
    n = len(keys[0])
    new = np.zeros(n, dtype=bool)
    new[:1] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    out: IntArray = np.flatnonzero(new)
    return out
