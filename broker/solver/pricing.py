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

g_cp is the same for every column of a group (class, site, spot), so the ratios are
computed per group and only gathered per column, a chunk of pools at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.pooltable import FloatArray, IntArray
from broker.solver.master import Master
from broker.solver.model import ModelInput
from broker.solver.universe import Universe


@dataclass
class ColumnCosts:
    """Reduced costs of the universe columns on the restricted model's pools (the only ones
    the restricted LP prices exactly), pool by pool."""

    idx: IntArray
    val: FloatArray


def pool_reduced_costs(
    mi: ModelInput, u: Universe, fixed_duals: FloatArray, node_row0: int
) -> tuple[IntArray, FloatArray]:
    """(pools, lower bound on the reduced cost of one node) for every candidate pool."""
    if u.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
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
    ub = np.minimum(best[:, 0] * mi.vcpus[p], best[:, 1] * mi.mem[p])
    return p, mi.node_cost[p] - ub - best[:, 2]


def column_reduced_costs(mi: ModelInput, u: Universe, m: Master, row_dual: FloatArray) -> ColumnCosts:
    """Reduced cost of every universe column on a pool of the restricted model.

    Rows a column would bring along (its fit row) are slack at zero, so their duals are 0
    and this is exact for the restricted LP.
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
    return ColumnCosts(on, rc)
