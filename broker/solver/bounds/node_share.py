"""The node-share bound: an LP-free lower bound, for when column generation cannot finish in time.

Split each node's cost over its cpu and memory, a share lam_p to cpu, per pool: adding pool
p's capacity rows weighted lam_p cost_p / vcpus_p and (1 - lam_p) cost_p / mem_p (Lagrangian
multipliers >= 0: valid for every lam in [0, 1]^P) leaves the node columns at cost 0 and
prices a replica of class c on pool p at

    each_cp = rep_cost_cp + cost_p (lam_p d_cpu / vcpus_p + (1 - lam_p) d_mem / mem_p),

so the classes separate. A GPU node first hands a share of its cost to its GPUs (`gpu_share`,
a multiplier on the GPU rows: a GPU replica pays for its GPUs, not a cpu/memory sliver of the
node) and splits the rest. Per class, with the demand, spot and spread rows kept:
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
Lagrangian at that split, so its optimum replaces their floors (node_share_egress.py).

The best single split for all pools is found by golden-section search (the plain total is
concave in it); from there each pool's own split is moved by L-BFGS-B on the floors smoothed
by softmins (`_smoothed_ascent`), and the best split seen gives the bound. On big requests
relaxed_lp.py hands it better prices to start from: the duals of its relaxation's LP
(`DualPrices`). docs/solver-proof.md proves the bound valid.
"""

from __future__ import annotations

import itertools
import math
import threading
import time

import numpy as np
from scipy.optimize import minimize

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.bounds.node_share_columns import (
    CHUNK,
    ShareColumns,
    SplitPoint,
    changes,
    column_chunks,
    column_prices,
    evaluate_split,
    share_columns,
)
from broker.solver.bounds.node_share_egress import egress_gain
from broker.solver.model.columns import Index
from broker.solver.model.layout import ModelInput
from broker.solver.options import ShareBoundOptions
from broker.solver.types import BestSoFar, DualPrices, EgressColumns


def node_share_bound(
    mi: ModelInput,
    *,
    time_budget_s: float = math.inf,
    rounds: int | None = None,
    egress: EgressColumns | None = None,
    duals: DualPrices | None = None,
    start: FloatArray | None = None,
    stop: threading.Event | None = None,
    options: ShareBoundOptions | None = None,
    so_far: BestSoFar | None = None,
) -> float:
    """Sum of the classes' floors at the best per-pool cpu/memory split found within the time
    budget (rounds=0: the best single split; None: options.rounds), plus what the dependency
    pairs' egress adds at that split; every split gives a valid bound. `duals` price the pools
    of an LP (what they leave is split), `start` is the split to climb from (else the best
    single split); the ascent ends early once `stop` is set. Every bound proven on the way is
    offered to `so_far`."""
    started = time.perf_counter()
    opts = options if options is not None else ShareBoundOptions()
    so_far = so_far if so_far is not None else BestSoFar()
    paired = np.zeros(len(mi.classes), dtype=bool)
    if egress is not None and len(egress.k):
        paired[egress.k] = paired[egress.v] = True
    cols = share_columns(mi, paired, duals, with_gpu_share=opts.gpu_share)
    lam = start if start is not None else _best_global_split(cols, opts.golden_steps, so_far)[0]
    pairs = paired.any() and egress is not None
    best = -math.inf
    egress_s = 0.0
    if pairs and egress is not None:
        # the pairs' LP at the start split first: a bound that holds should the ascent leave no
        # time for it (on a busy machine its estimate fell short, and the bound lost all egress),
        # and its measured time is what the LP at the ascent's split is kept
        t0 = time.perf_counter()
        first = evaluate_split(cols, lam)
        so_far.offer(first.value)
        best = first.value + egress_gain(mi, cols, first, egress, max(0.5 * time_budget_s, 0.0))
        so_far.offer(best)
        egress_s = max(opts.egress_s_per_col * len(egress.k), opts.egress_margin * (time.perf_counter() - t0))
    deadline = started + time_budget_s - egress_s
    point = _smoothed_ascent(cols, lam, deadline, opts.rounds if rounds is None else rounds, opts, stop)
    so_far.offer(point.value)
    if not pairs or egress is None:
        return point.value
    if stop is not None and stop.is_set():
        # told to hurry (the search's time is up and it waits for this thread): what is proven
        # stands; the LP below would run for at least what the first one took
        return max(best, point.value)
    # at least what the first LP took: the ascent can end a little past its deadline
    left = max(time_budget_s - (time.perf_counter() - started), egress_s / opts.egress_margin)
    best = max(best, point.value + egress_gain(mi, cols, point, egress, left))
    so_far.offer(best)
    return best


def _smoothed_ascent(
    cols: ShareColumns,
    lam: FloatArray,
    deadline: float,
    rounds: int,
    opts: ShareBoundOptions,
    stop: threading.Event | None = None,
) -> SplitPoint:
    """The floors at the best split found by maximising smoothed floors from `lam`.

    The sum of floors is concave in the splits but not smooth: each floor is a minimum over
    columns. Replaced by a softmin (temperature per class, relative to its price), it is smooth
    and L-BFGS-B climbs it far faster than subgradient steps did, and closer to the optimum of
    this relaxation. Each round moves every pool's split at most `trust` from the best split so
    far, so only the columns that could come near their term's minimum within that box enter the
    softmin (a fraction of them); the floors themselves are always evaluated over every column, so whatever the
    smoothing does, the bound stays valid. A round that does not raise the floors halves the box
    and the temperature, one that raises them little halves the temperature."""
    best_pt, best_lam = evaluate_split(cols, lam), lam
    trust, temperature = opts.trust, opts.temperature
    for _ in range(rounds):
        if time.perf_counter() >= deadline or trust < opts.min_trust or (stop is not None and stop.is_set()):
            break
        smooth = _Smoothed(cols, best_pt, best_lam, trust, temperature, opts.near)
        lam = smooth.maximise(best_lam, trust, deadline, opts.round_iterations, stop)
        pt = evaluate_split(cols, lam)
        if pt.value > best_pt.value:
            if pt.value < best_pt.value + opts.stall * abs(best_pt.value):
                temperature = max(temperature / 2, opts.min_temperature)
            best_pt, best_lam, trust = pt, lam, min(1.5 * trust, opts.max_trust)
        else:
            trust /= 2
            temperature = max(temperature / 2, opts.min_temperature)
    return best_pt


class _Smoothed:
    """The floors at `pt`'s choices, each minimum replaced by a softmin over the columns that
    could come near it while every split stays within `trust` of `lam`: the cheapest column
    (weighted by the replicas the floor prices there), and for the spot cap and spread floors
    the cheapest non-spot column and the cheapest off the first site."""

    def __init__(
        self, cols: ShareColumns, pt: SplitPoint, lam: FloatArray, trust: float, temperature: float, near_taus: float
    ) -> None:
        tau = temperature * np.maximum(np.abs(pt.low), 1e-12)
        near = _near_columns(cols, pt, lam, trust, near_taus * tau)
        seg = np.searchsorted(cols.seg_bound, near, side="right") - 1
        cls = cols.seg_class[seg]
        # float32 is enough here: only the floors' evaluation has to be exact
        self.pool, self.base = cols.pool[near], cols.at_mem[near]
        self.slope = cols.at_cpu[near] - self.base
        self.n_pools = cols.n_pools
        r, cap, off = cols.replicas, cols.spot_cap, cols.off
        # int32 positions, in-place arithmetic and terms of at most about CHUNK columns: on big
        # requests millions of columns are near
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
            start = changes(cls[idx])
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
        self, lam: FloatArray, trust: float, deadline: float, iterations: int, stop: threading.Event | None = None
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
                options={"maxiter": iterations},
            )  # fmt: skip
        except StopIteration:
            return reached[-1]
        out: FloatArray = res.x
        return out


def _near_columns(cols: ShareColumns, pt: SplitPoint, lam: FloatArray, trust: float, margin: FloatArray) -> IntArray:
    """The columns whose price, with every split within `trust` of `lam`, can come within
    `margin` (per class) of the minimum their floor's term takes there; a chunk at a time."""
    n_segs = len(cols.seg_bound) - 1
    seg_high = np.empty(n_segs)  # the most each segment's cheapest column can cost in the box
    for s0, s1, c0, c1 in column_chunks(cols):
        each, slope = column_prices(cols, lam, c0, c1)
        each += trust * np.abs(slope)
        seg_high[s0:s1] = np.minimum.reduceat(each, cols.seg_bound[s0:s1] - c0)
    group_high = np.minimum.reduceat(seg_high, cols.group_start)
    low = np.minimum.reduceat(group_high, cols.class_group)
    nonspot = np.minimum.reduceat(np.where(cols.seg_spot, np.inf, seg_high), cols.class_seg)
    group_high[pt.first_group] = np.inf
    other = np.minimum.reduceat(group_high, cols.class_group)
    high = (np.choose(pt.choice, [low, nonspot, other]) + margin)[cols.seg_class]
    near: list[IntArray] = []
    for s0, s1, c0, c1 in column_chunks(cols):
        each, slope = column_prices(cols, lam, c0, c1)
        each -= trust * np.abs(slope)
        limit = np.repeat(high[s0:s1], np.diff(cols.seg_bound[s0 : s1 + 1]))
        near.append(c0 + np.flatnonzero(each <= limit))
    return np.concatenate(near)


def _best_global_split(cols: ShareColumns, steps: int, so_far: BestSoFar | None = None) -> tuple[FloatArray, float]:
    """Golden-section search for the best single split, as a per-pool start and its value; every
    split's value is a bound, offered to `so_far` at once (a hurried search takes the first)."""

    def total(share: float) -> float:
        value = evaluate_split(cols, np.full(cols.n_pools, share)).value
        if so_far is not None:
            so_far.offer(value)
        return value

    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    lo, hi = 0.0, 1.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = total(a), total(b)
    best = max((fa, a), (fb, b))
    for _ in range(steps - 2):
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
