"""Pattern cuts: how many nodes one pool needs for the replicas the LP puts on it.

A *pattern* is what one node of a pool can run: counts q_c of classes c with
sum_c q_c d_cr <= cap_r for every resource r and q_c <= u_c (what one node may hold of c:
its fit, capped at its replicas and spread.max_per_node). Any packing of x_c replicas onto n
nodes is n patterns that cover x, so for every pi >= 0 with pi . q <= 1 for every pattern q

    sum_c pi_c x_cp <= n_p                                                      (pattern cut)

holds for every placement that packs (Gilmore & Gomory 1961; Valério de Carvalho 1999). The
strongest such pi at a point x is the dual of the pool's pattern LP

    min sum_q lambda_q   s.t.  sum_q lambda_q q_c >= x_c,  lambda >= 0,

solved here by column generation with a bounded knapsack over the few classes on the pool as
pricing (a small HiGHS MIP). Its last pricing proves max_q pi . q; pi is divided by that
maximum when it exceeds 1, so every cut is valid whatever the tolerances (Clautiaux, Alves &
Valério de Carvalho 2010: the pattern LP's dual is the best bound of this kind).
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np
from scipy.optimize import linprog

from broker.core.pooltable import FloatArray
from broker.solver.model.quiet_highs import QuietHighs

INF = highspy.kHighsInf
# a knapsack's capacity holds a pattern up to this relative slack (the fit rule's 1e-9 on ratios)
_FIT_SLACK = 1e-9


@dataclass(frozen=True)
class PatternBound:
    """A pool's pattern LP at a point x: the nodes it needs at least (`nodes`) and the cut's
    coefficients (`pi`, dual feasible: pi . q <= 1 for every pattern q)."""

    nodes: float
    pi: FloatArray


def pattern_bound(
    demand: FloatArray, cap: FloatArray, upper: FloatArray, x: FloatArray, *, max_patterns: int = 50_000
) -> PatternBound:
    """The pattern LP of one pool at x (per class: demand (k, 3), upper (k,), x (k,)) and the
    cut it gives; cap is one node's (cpu, memory, GPUs). Every maximal pattern is enumerated
    when there are at most `max_patterns` (one LP, no pricing); else column generation."""
    upper = np.maximum(np.floor(upper + 1e-9), 1.0)
    limit = cap * (1 + _FIT_SLACK) + _FIT_SLACK
    every = maximal_patterns(demand, limit, upper, max_patterns)
    if every is None:
        return _by_column_generation(demand, limit, upper, x)
    res = linprog(np.ones(len(every)), A_ub=-every.T, b_ub=-x, bounds=(0, None), method="highs-ds")
    if res.status != 0:
        return _by_column_generation(demand, limit, upper, x)
    pi = np.maximum(-np.asarray(res.ineqlin.marginals), 0.0)
    worst = float((every @ pi).max()) if len(every) else 1.0
    pi = pi / max(1.0, worst)
    return PatternBound(float(pi @ x), pi)


def maximal_patterns(demand: FloatArray, limit: FloatArray, upper: FloatArray, max_patterns: int) -> FloatArray | None:
    """Every pattern to which no replica can be added (rows: patterns, columns: classes), or
    None when there are more than max_patterns partial ones."""
    k = len(upper)
    q = np.zeros((1, k))
    used = np.zeros((1, 3))
    for c in range(k):
        counts = np.arange(int(upper[c]) + 1, dtype=np.float64)
        grown_used = (used[:, None, :] + counts[None, :, None] * demand[c][None, None, :]).reshape(-1, 3)
        keep = (grown_used <= limit).all(axis=1)
        if int(keep.sum()) > max_patterns:
            return None
        grown = np.repeat(q, len(counts), axis=0)
        grown[:, c] = np.tile(counts, len(q))
        q, used = grown[keep], grown_used[keep]
    room = limit[None, :] - used
    can_grow = np.zeros(len(q), dtype=bool)
    for c in range(k):
        can_grow |= (q[:, c] < upper[c]) & (demand[c][None, :] <= room).all(axis=1)
    out: FloatArray = q[~can_grow & (q.sum(axis=1) > 0)]
    return out


def _by_column_generation(demand: FloatArray, limit: FloatArray, upper: FloatArray, x: FloatArray) -> PatternBound:
    """The pattern LP grown from single-class patterns, priced by a small knapsack MIP."""
    k = len(x)
    lp = QuietHighs()
    lp.setOptionValue("presolve", "off")
    none = np.zeros(0, dtype=np.int32)
    lp.addRows(k, x.astype(np.float64), np.full(k, INF), 0, none, none, np.zeros(0))
    for c in range(k):  # each class alone, as many as a node holds
        _add_pattern(lp, {c: float(upper[c])})
    pricing = _Knapsack(demand, limit, upper)
    pi, best = np.zeros(k), np.inf
    for _ in range(200):
        lp.run()
        pi = np.maximum(np.asarray(lp.getSolution().row_dual), 0.0)
        q, best = pricing.best(pi)
        if best <= 1.0 + 1e-7:
            break
        _add_pattern(lp, {c: float(v) for c, v in enumerate(q) if v > 0})
    pi = pi / max(1.0, best)
    return PatternBound(float(pi @ x), pi)


def _add_pattern(lp: highspy.Highs, counts: dict[int, float]) -> None:
    idx = np.array(list(counts), dtype=np.int32)
    lp.addCol(1.0, 0.0, INF, len(idx), idx, np.array(list(counts.values())))


class _Knapsack:
    """max pi . q over the patterns of one node: a bounded knapsack in up to three resources."""

    def __init__(self, demand: FloatArray, cap: FloatArray, upper: FloatArray) -> None:
        k = len(upper)
        self.h = h = QuietHighs()
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.0)
        h.addVars(k, np.zeros(k), upper.astype(np.float64))
        h.changeColsIntegrality(k, np.arange(k, dtype=np.int32), np.full(k, highspy.HighsVarType.kInteger))
        for r in range(3):
            use = np.flatnonzero(demand[:, r] > 0)
            if len(use) == 0:
                continue
            h.addRow(-INF, float(cap[r]), len(use), use.astype(np.int32), demand[use, r].astype(np.float64))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.k = k

    def best(self, pi: FloatArray) -> tuple[FloatArray, float]:
        """The best pattern at pi and a proven upper bound on pi . q over every pattern."""
        h = self.h
        h.changeColsCost(self.k, np.arange(self.k, dtype=np.int32), pi.astype(np.float64))
        h.run()
        info = h.getInfo()
        q = np.round(np.asarray(h.getSolution().col_value))
        bound = float(info.mip_dual_bound)
        if not np.isfinite(bound):
            bound = float(pi @ self._upper_all())
        return q, max(bound, float(pi @ q))

    def _upper_all(self) -> FloatArray:
        lp = self.h.getLp()
        return np.asarray(lp.col_upper_)


class PatternNodes:
    """Nodes a pool needs for whole replicas of several classes at least: the pattern LP at
    those counts, rounded up (a bound for every packing, and the optimal packing's count on
    nearly every pool: bench/RESULTS.md). Remembered by the replicas' shapes and counts, so the
    search's many evaluations of one placement's pools cost one LP each."""

    def __init__(self) -> None:
        self._memo: dict[tuple[object, ...], int] = {}

    def need(self, demand: FloatArray, cap: FloatArray, upper: FloatArray, counts: FloatArray) -> int:
        key = (tuple(cap.tolist()), tuple(map(tuple, np.c_[demand, upper, counts].tolist())))
        if key not in self._memo:
            self._memo[key] = int(np.ceil(pattern_bound(demand, cap, upper, counts).nodes - 1e-6))
        return self._memo[key]
