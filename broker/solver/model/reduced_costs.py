"""Reduced costs: what any column, and one node of any candidate pool, could still save the LP.

With the duals y of a restricted LP, a replica column (c, p) earns
g_cp = (A^T y)_cp - cost_cp per replica (demand, spot, spread and egress rows
are laid out for every candidate, so this is exact for pools outside the LP).
One node of pool p holds replicas with sum_c d_cr y_c <= cap_pr for each
resource r, so it earns at most cap_pr * max_c g_cp / d_cr; the smaller of the
cpu and memory bounds is an upper bound UB_p and

    rc_p = node_cost_p - UB_p

is a lower bound on the reduced cost of a node of p (Lagrangian bound: every
placement that opens n nodes of an excluded pool p costs at least
z_LP + n * rc_p). GPUs are left out: a class without GPUs would make that
bound meaningless, and leaving a resource out only weakens the bound.

g_cp is the same for every column of a group (class, site, spot), so the ratios are
computed per group and only gathered per column, a chunk of pools at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.model.columns import XColumns
from broker.solver.model.layout import ModelInput
from broker.solver.model.master import Master
from broker.solver.model.universe import Universe


@dataclass
class ColumnCosts:
    """Reduced costs of the universe columns on the restricted model's pools (the only ones
    the restricted LP prices exactly), pool by pool."""

    idx: IntArray
    val: FloatArray


@dataclass
class PoolCosts:
    """Per candidate pool: a lower bound on the reduced cost of one of its nodes, and whether its
    cpu (rather than its memory) limits what a node earns: a node cost put all on cpu there
    (a split of 1 in bounds/node_share.py) then leaves no column of it a negative reduced cost."""

    pools: IntArray
    val: FloatArray
    cpu_limits: BoolArray


def pool_reduced_costs(mi: ModelInput, u: Universe, fixed_duals: FloatArray, node_row0: int) -> PoolCosts:
    """Lower bounds on the reduced cost of one node for every candidate pool."""
    if u.size == 0:
        return PoolCosts(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=bool))
    cols = u.cols
    earn = np.maximum(cols.earnings(fixed_duals), 0.0)
    d = np.stack([c.demand for c in mi.classes])[cols.g_class]
    # a node of p also counts towards the spread rows sum_{q at s} n_q >= z_cs / K_c
    credit = np.zeros(len(earn))
    spread = cols.g_zpos >= 0
    credit[spread] = np.maximum(fixed_duals[node_row0 + cols.g_zpos[spread]], 0.0)
    per_group = np.stack([earn / d[:, 0], earn / d[:, 1], credit], axis=1)
    best = np.zeros((len(u.seg_pool), 3))
    seg = 0
    for positions, rel in u.segment_chunks():
        vals = per_group[u.cols.group[u.order[positions]]]
        k = slice(seg, seg + len(rel))
        best[k, :2] = np.maximum.reduceat(vals[:, :2], rel, axis=0)
        best[k, 2] = np.add.reduceat(vals[:, 2], rel)
        seg += len(rel)
    p = u.seg_pool
    by_cpu, by_mem = best[:, 0] * mi.vcpus[p], best[:, 1] * mi.mem[p]
    return PoolCosts(p, mi.node_cost[p] - np.minimum(by_cpu, by_mem) - best[:, 2], by_cpu <= by_mem)


def column_reduced_costs(mi: ModelInput, u: Universe, m: Master, row_dual: FloatArray) -> ColumnCosts:
    """Reduced cost of every universe column on a pool of the restricted model.

    Rows a column would bring along (its fit row) are slack at zero, so their duals are 0
    and this is exact for the restricted LP; its pool's large-replica rows are already there.
    """
    on = u.columns_on(m.pools).astype(np.int64)
    cols = u.cols
    rc = -cols.earnings(row_dual[: m.lay.n_fixed_rows])[cols.group[on]]
    cls, pool = cols.cls(on), cols.pool[on]
    for r in range(3):
        rows = m.cap_row[:, r]
        dual = np.where(rows >= 0, row_dual[np.maximum(rows, 0)], 0.0)
        if dual.any():
            rc -= m.demand[cls, r] * dual[pool]
    rc -= m.large_dual_terms(row_dual, cls, pool)
    return ColumnCosts(on, rc)


@dataclass
class ReducedCosts:
    """The reduced costs of the universe's columns and pools at a restricted LP's duals."""

    cols: ColumnCosts
    pools: PoolCosts
    new_pool: BoolArray  # per pool of `pools`: outside the model, and a node could pay off
    neg_cols: BoolArray  # per column of `cols`: outside the model, negative reduced cost

    @property
    def converged(self) -> bool:
        """Nothing outside the model could lower the LP: its value is the LP over the universe."""
        return not self.new_pool.any() and not self.neg_cols.any()


def reduced_costs_at(mi: ModelInput, u: Universe, m: Master, row_dual: FloatArray, value: float) -> ReducedCosts:
    """Every column's and pool's reduced cost at the duals of the LP of value `value`."""
    tol = 1e-9 * max(1.0, abs(value))
    rc_x = column_reduced_costs(mi, u, m, row_dual)
    rc_p = pool_reduced_costs(mi, u, row_dual[: m.lay.n_fixed_rows], m.lay.node_row0)
    return ReducedCosts(
        rc_x, rc_p, (m.pool_col[rc_p.pools] < 0) & (rc_p.val < -tol), ~m.in_model[rc_x.idx] & (rc_x.val < -tol)
    )


def entering(u: Universe, rc: ReducedCosts, fixed_duals: FloatArray, per_class: int, pools: int) -> IntArray:
    """The columns a CG round adds: a few of the best per class (the basis is kept, so more rounds
    are cheap and the model stays small: one big step per round made every LP slower) and the
    best columns of the most promising new pools."""
    add = [best_per_class(u.cols, rc.cols, rc.neg_cols, per_class)]
    if rc.new_pool.any():
        new = rc.pools.pools[rc.new_pool]
        best = new[np.argsort(rc.pools.val[rc.new_pool], kind="stable")[:pools]]
        add.append(earning_columns(u, fixed_duals, best))
    return np.concatenate(add)


def best_per_class(cols: XColumns, rc: ColumnCosts, keep: BoolArray, k: int) -> IntArray:
    """The k most negative reduced costs of each class among the columns whose reduced costs are known in `keep`."""
    out: IntArray = rc.idx[_best_positions(cols, rc, keep, k)]
    return out


def shortlist(cols: XColumns, rc: ColumnCosts, k: int, on: BoolArray, k_on: int) -> ColumnCosts:
    """Each class's k columns of least reduced cost and its k_on best among `on`: all that the
    MIPs of a search read once no reduced-cost inclusion can follow. On big requests that is a
    small fraction of the columns, so their memory is free while the bounds and the MIPs run."""
    pos = np.union1d(_best_positions(cols, rc, None, k), _best_positions(cols, rc, on, k_on))
    return ColumnCosts(rc.idx[pos], rc.val[pos])


def _best_positions(cols: XColumns, rc: ColumnCosts, keep: BoolArray | None, k: int) -> IntArray:
    """Positions in `rc` of the k most negative reduced costs of each class among `keep`."""
    at = np.arange(len(rc.idx)) if keep is None else np.flatnonzero(keep)
    cls = cols.cls(rc.idx[at])
    order = np.lexsort((rc.val[at], cls))
    c = cls[order]
    first = np.r_[0, np.flatnonzero(c[1:] != c[:-1]) + 1]
    rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
    out: IntArray = at[order[rank < k]]
    return out


def earning_columns(u: Universe, fixed_duals: FloatArray, pools: IntArray, per_pool: int = 10) -> IntArray:
    """Columns of new pools worth trying: the classes that earn most per node there."""
    earn = u.cols.earnings(fixed_duals)
    out: list[IntArray] = []
    for p in pools:
        cols = u.pool_columns(int(p)).astype(np.int64)
        gain = earn[u.cols.group[cols]]
        best = np.argsort(-gain, kind="stable")[:per_pool]
        top = cols[best]
        out.append(top[gain[best] > 0] if (gain[best] > 0).any() else top[:1])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
