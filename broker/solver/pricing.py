"""Pricing: what opening one node of any candidate pool could still earn.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.pooltable import FloatArray, IntArray
from broker.solver.master import Master
from broker.solver.model import Index, Layout, ModelInput, XColumns, x_columns


@dataclass
class Universe:
    """Every candidate (class, pool) column, grouped by pool for fast per-pool maxima.

    Per-column arrays are 32-bit: 20,000 workloads make 70.8 M columns."""

    cols: XColumns
    order: Index  # columns sorted by pool
    starts: IntArray  # segment starts in `order`
    seg_pool: IntArray  # pool of each segment
    seg_of_pool: IntArray  # per catalog pool: its segment, -1 = none
    cls: Index  # per column (sorted order): its class
    zpos: Index  # per column (sorted order): spread node row offset, -1 = none
    group: Index  # per column (sorted order): its group (model.XColumns)

    @property
    def size(self) -> int:
        return self.cols.size

    def pool_columns(self, p: int) -> Index:
        """The universe columns on pool p."""
        k = int(self.seg_of_pool[p])
        if k < 0:
            return np.zeros(0, dtype=self.order.dtype)
        end = self.starts[k + 1] if k + 1 < len(self.starts) else len(self.order)
        out: Index = self.order[self.starts[k] : end]
        return out


def make_universe(mi: ModelInput, lay: Layout) -> Universe:
    cols = x_columns(mi, lay)
    # pools fit 16 bits on the pruned public catalog: numpy then sorts by radix, ~10x faster
    key = cols.pool.astype(np.uint16) if mi.n_pools < 1 << 16 else cols.pool
    order: Index = np.argsort(key, kind="stable").astype(np.int32 if cols.size < 1 << 31 else np.int64)
    del key
    sp = cols.pool[order]
    starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]]) if len(sp) else np.zeros(0, dtype=np.int64)
    seg_pool = sp[starts].astype(np.int64) if len(sp) else np.zeros(0, dtype=np.int64)
    del sp
    seg_of_pool = np.full(mi.n_pools, -1, dtype=np.int64)
    seg_of_pool[seg_pool] = np.arange(len(seg_pool))
    return Universe(
        cols=cols,
        order=order,
        starts=starts,
        seg_pool=seg_pool,
        seg_of_pool=seg_of_pool,
        cls=cols.cls[order],
        zpos=cols.zpos(order),
        group=cols.group[order],
    )


def pool_reduced_costs(
    mi: ModelInput, u: Universe, fixed_duals: FloatArray, node_row0: int
) -> tuple[IntArray, FloatArray]:
    """(pools, lower bound on the reduced cost of one node) for every candidate pool."""
    if u.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    g = np.maximum(u.cols.earnings(fixed_duals)[u.group], 0.0)
    d = np.stack([c.demand for c in mi.classes])
    best_cpu = np.maximum.reduceat(g / d[u.cls, 0], u.starts)
    best_mem = np.maximum.reduceat(g / d[u.cls, 1], u.starts)
    p = u.seg_pool
    ub = np.minimum(best_cpu * mi.vcpus[p], best_mem * mi.mem[p])
    # a node of p also counts towards the spread rows sum_{q at s} n_q >= z_cs / K_c
    credit = np.zeros(len(p))
    if (u.zpos >= 0).any():
        site_credit = np.where(u.zpos >= 0, fixed_duals[node_row0 + np.maximum(u.zpos, 0)], 0.0)
        credit = np.add.reduceat(np.maximum(site_credit, 0.0), u.starts)
    return p, mi.node_cost[p] - ub - credit


def column_reduced_costs(mi: ModelInput, u: Universe, m: Master, row_dual: FloatArray) -> FloatArray:
    """Reduced cost of every universe column on a pool of the restricted model (inf elsewhere).

    Rows a column would bring along (its fit row) are slack at zero, so their duals are 0
    and this is exact for the restricted LP.
    """
    out = np.full(u.size, np.inf)
    on = np.flatnonzero(m.pool_col[u.cols.pool] >= 0)
    if len(on) == 0:
        return out
    earn = u.cols.earnings(row_dual[: m.lay.n_fixed_rows])[u.cols.group[on]]
    d = m.demand[u.cols.cls[on]]
    cap = np.zeros(len(on))
    rows_all = m.cap_row[u.cols.pool[on]]
    for r in range(3):
        rows = rows_all[:, r]
        has = rows >= 0
        cap[has] += d[has, r] * row_dual[rows[has]]
    out[on] = -earn - cap
    return out


def pool_earnings(u: Universe, fixed_duals: FloatArray) -> FloatArray:
    """g_cp per universe column (original order): what one replica earns under the duals."""
    return u.cols.earnings(fixed_duals)[u.cols.group]
