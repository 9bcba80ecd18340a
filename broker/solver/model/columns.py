"""The universe's replica columns: every candidate (class, pool) pair, grouped by the fixed rows
they meet, and the array helpers that read them without a Python loop per column."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.model.layout import Layout, ModelInput
from broker.solver.prepare.classes import SPOT

# per-column index arrays of the universe: 32-bit where they fit (tens of millions of columns)
Index = npt.NDArray[np.signedinteger[Any]]


@dataclass
class XColumns:
    """Replica columns (class, pool), by class then pool.

    Every column of class c at site s with the same capacity kind (spot or not) has the same
    entries in the fixed rows and the same per-replica cost (storage and latency are priced
    per site): such columns form a *group*, and the fixed-row matrix is stored per group
    (~20x fewer than columns on the public catalog), so a reduced-cost pass reads it once per group.
    Columns a keep row refers to (re-plans) are groups of their own."""

    pool: Index
    starts: IntArray  # per class: its first column (and the total at the end)
    group: Index  # per column
    g_class: IntArray  # per group: its class
    g_cost: FloatArray  # per group: objective cost per replica
    g_zpos: Index  # per group: z column of (class, site), -1 = none
    g_fixed: sp.csc_matrix = field(repr=False)  # [n_fixed_rows, n_groups]

    @property
    def size(self) -> int:
        return len(self.pool)

    def cls(self, idx: Index | slice) -> IntArray:
        """The class of columns `idx` (columns are numbered class by class)."""
        cols = np.arange(*idx.indices(self.size)) if isinstance(idx, slice) else idx
        out: IntArray = np.searchsorted(self.starts, cols, side="right") - 1
        return out

    def position(self, c: IntArray, p: IntArray) -> IntArray:
        """Column numbers of the pairs (c[i], p[i]), -1 where p is no candidate of c."""
        return _positions(self.starts, self.pool, c, p)

    def zpos(self, idx: Index | slice) -> Index:
        out: Index = self.g_zpos[self.group[idx]]
        return out

    def earnings(self, fixed_duals: FloatArray) -> FloatArray:
        """Per group: (A^T y) - cost, what one replica earns under the fixed rows' duals."""
        out: FloatArray = np.asarray(self.g_fixed.T @ fixed_duals) - self.g_cost
        return out


def x_columns(mi: ModelInput, lay: Layout) -> XColumns:
    """Every candidate (class, pool) column, grouped, with the groups' entries in the fixed rows."""
    n_each = [len(c.cand) for c in mi.classes]
    xc_start = np.r_[0, np.cumsum(n_each)].astype(np.int64)
    # 32-bit per-column arrays: big requests make tens of millions of columns
    xp = np.concatenate([c.cand for c in mi.classes], dtype=np.int32) if mi.classes else np.zeros(0, np.int32)
    n = len(xp)
    ns = mi.n_sites
    # group key (class, site, spot) through a dense table: linear time, no sort of n keys
    n_keys = max(len(mi.classes), 1) * 2 * ns
    kt = np.int32 if n_keys < 1 << 31 else np.int64
    cell = (mi.site_idx * 2 + (mi.cap_idx == SPOT)).astype(kt)
    key: Index = np.empty(n, dtype=kt)
    for c, cl in enumerate(mi.classes):  # per class: no n-long class array
        key[xc_start[c] : xc_start[c + 1]] = c * (2 * ns) + cell[cl.cand]
    seen = np.zeros(n_keys, dtype=bool)
    seen[key] = True
    gid = (np.cumsum(seen) - 1).astype(np.int32)
    group = gid[key]
    ng = int(seen.sum())
    g_key = np.flatnonzero(seen)
    if len(lay.keep_key):
        # k_i - x_cp <= 0 names one column: it gets a group of its own
        pos = _positions(xc_start, xp, mi.keep_class, mi.keep_pool)
        hit = pos >= 0
        keep_cols = pos[hit]
        group[keep_cols] = ng + np.arange(len(keep_cols))
        g_key = np.concatenate([g_key, key[keep_cols].astype(np.int64)])
        ng += len(keep_cols)
        keep_rows = lay.keep_row0 + np.flatnonzero(hit)
    del gid, key
    g_key = g_key.astype(np.int64)
    gc = g_key // (2 * ns)
    gs = (g_key % (2 * ns)) // 2
    g_spot = (g_key % 2) == 1
    g_cost = np.zeros(ng)
    if n:
        for c, cl in enumerate(mi.classes):  # per class: no n-long temporary
            g_cost[group[xc_start[c] : xc_start[c + 1]]] = cl.rep_cost
    gcols = np.arange(ng)
    rows = [gc]
    vals = [np.ones(ng)]
    ccols = [gcols]
    spot = (lay.spot_row[gc] >= 0) & g_spot
    rows.append(lay.spot_row[gc][spot])
    vals.append(np.ones(int(spot.sum())))
    ccols.append(gcols[spot])
    cs_key = gc * ns + gs
    g_zpos = np.full(ng, -1, dtype=np.int32)
    if lay.n_z:
        pos = np.minimum(np.searchsorted(lay.z_key, cs_key), lay.n_z - 1)
        hit_z = lay.z_key[pos] == cs_key
        g_zpos[hit_z] = pos[hit_z]
        rows.append(lay.n_classes + int((lay.spot_row >= 0).sum()) + pos[hit_z])
        vals.append(-np.ones(int(hit_z.sum())))
        ccols.append(gcols[hit_z])
    if lay.n_e:
        replicas = np.array([c.replicas for c in mi.classes], dtype=np.float64)
        for keys, owner, sign in ((lay.e_keys_k, lay.e_class, -1.0), (lay.e_keys_v, lay.e_peer, 1.0)):
            gi, e = _join(keys, cs_key)  # groups meet egress rows on (class, site)
            rows.append(lay.e_row0 + e)
            ccols.append(gi)
            # in e - x_k/R_k + x_v/R_v >= 0: the sender's replicas push traffic out
            vals.append(sign / replicas[owner[e]])
    if lay.n_near:
        # a - Y + x_v(s) <= 0: v's replicas at s itself do not count as "elsewhere in the cloud"
        gi, j = _join(lay.e_peer[lay.near_e] * ns + lay.e_site[lay.near_e], cs_key)
        rows.append(lay.near_row0 + j)
        ccols.append(gi)
        vals.append(np.ones(len(gi)))
        # Y - sum x_v = 0 over v's groups in the cloud
        gi, j = _join(lay.y_class * (1 << 16) + lay.y_prov, gc * (1 << 16) + mi.site_provider[gs])
        rows.append(lay.y_row0 + j)
        ccols.append(gi)
        vals.append(-np.ones(len(gi)))
    if len(lay.keep_key):
        rows.append(keep_rows)
        ccols.append(group[keep_cols].astype(np.int64))
        vals.append(-np.ones(len(keep_cols)))
    g_fixed = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(ccols))),
        shape=(lay.n_fixed_rows, ng),
    )
    return XColumns(
        pool=xp,
        starts=xc_start,
        group=group,
        g_class=gc,
        g_cost=g_cost,
        g_zpos=g_zpos,
        g_fixed=g_fixed,
    )


def _positions(starts: IntArray, pool: Index, c: IntArray, p: IntArray) -> IntArray:
    """Where pool p[i] sits in class c[i]'s segment of `pool` (sorted within each class), -1 if
    absent: a bisection of all queries at once, no universe-long key array."""
    c = np.asarray(c, dtype=np.int64)
    p = np.asarray(p, dtype=np.int64)
    lo, end = starts[c].copy(), starts[c + 1]
    hi = end.copy()
    last = max(len(pool) - 1, 0)
    while (open_ := lo < hi).any():
        mid = (lo + hi) // 2
        below = open_ & (pool[np.minimum(mid, last)] < p)
        lo = np.where(below, mid + 1, lo)
        hi = np.where(open_ & ~below, mid, hi)
    hit = (lo < end) & (pool[np.minimum(lo, last)] == p) if len(pool) else np.zeros(len(c), dtype=bool)
    return np.where(hit, lo, -1)


def ranges(begin: IntArray, count: IntArray) -> IntArray:
    """begin[0] .. begin[0] + count[0] - 1, then begin[1] .., concatenated (no Python loop)."""
    out: IntArray = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + np.repeat(begin, count)
    return out


def _join(keys: IntArray, query: IntArray) -> tuple[IntArray, IntArray]:
    """Every pair (i, j) with query[i] == keys[j] (keys may repeat), without a Python loop."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    lo = np.searchsorted(sk, query, side="left")
    cnt = np.searchsorted(sk, query, side="right") - lo
    qi = np.repeat(np.arange(len(query)), cnt)
    return qi, order[ranges(lo, cnt)]
