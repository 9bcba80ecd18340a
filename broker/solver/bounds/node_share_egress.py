"""What dependency pairs' egress adds to the node-share bound: at a split, the classes in pairs are
priced together by small LPs over their kept rows (node_share.py explains why this stays a
relaxation)."""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.csgraph import connected_components

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.bounds.node_share_columns import ShareColumns, SplitPoint, segments_per_class
from broker.solver.model.columns import ranges
from broker.solver.model.layout import ModelInput
from broker.solver.types import EgressColumns

_NONE = np.zeros(0, dtype=np.int64)

# paired classes' variables per LP: one LP for every pair held too much memory in HiGHS
LP_CHUNK = 20_000


def egress_gain(
    mi: ModelInput, cols: ShareColumns, pt: SplitPoint, egress: EgressColumns, time_limit_s: float = math.inf
) -> float:
    """What the dependency pairs' egress adds to the sum of floors (module docstring): the LP of
    the paired classes' kept rows at this split, less their floors. Its blocks are the
    components of the dependency graph, so a class in several pairs counts once in each row
    it is in, never twice. The components are solved in LPs of about LP_CHUNK variables: one
    LP for all held too much memory in HiGHS on big requests. A chunk whose LP does not finish
    within the time limit adds nothing."""
    deadline = time.perf_counter() + time_limit_s
    classes = np.unique(np.r_[egress.k, egress.v])
    ki, vi = np.searchsorted(classes, egress.k), np.searchsorted(classes, egress.v)
    n = len(classes)
    _, comp = connected_components(sp.coo_matrix((np.ones(len(ki)), (ki, vi)), shape=(n, n)), directed=False)
    size = np.bincount(comp, weights=segments_per_class(cols)[classes]) + np.bincount(
        comp[ki], minlength=comp.max() + 1
    )
    chunk = (np.cumsum(size) - size) // LP_CHUNK
    total = 0.0
    for c in np.unique(chunk).tolist():
        mine = chunk[comp[ki]] == c
        sub = egress.select(mine)
        total += _pairs_gain(mi, cols, pt, sub, deadline - time.perf_counter())
    return total


def _pairs_gain(
    mi: ModelInput, cols: ShareColumns, pt: SplitPoint, egress: EgressColumns, time_limit_s: float
) -> float:
    """The LP of the classes in `egress`'s pairs at this split less their floors (0 if it does not finish)."""
    if time_limit_s <= 0:
        return 0.0
    classes = np.unique(np.r_[egress.k, egress.v])
    seg = ranges(cols.class_seg[classes], segments_per_class(cols)[classes])
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
    # k's share at s not matched by v's leaves: x_k(s)/R_k - x_v(s)/R_v - u - w <= 0, u at the far
    # rate, w at the cloud's own rate, open only as far as v runs at another site of the cloud
    two_tiers = egress.near is not None and egress.far is not None
    near = egress.near if egress.near is not None else np.full(n_e, np.inf)
    far = egress.far if egress.far is not None else egress.cost
    gated = np.flatnonzero(np.isfinite(near)) if two_tiers else _NONE
    n_w = len(gated)
    eg_rows = [i_k, i_v, np.arange(n_e), gated]
    eg_cols = [x_k, x_v, n_x + np.arange(n_e), n_x + n_e + np.arange(n_w)]
    eg_vals = [1.0 / rk[i_k], -1.0 / rv[i_v], -np.ones(n_e), -np.ones(n_w)]
    ub_rows, ub_cols = [np.concatenate(eg_rows)], [np.concatenate(eg_cols)]
    ub_vals, ub_rhs = [np.concatenate(eg_vals)], [np.zeros(n_e)]
    cost: list[FloatArray] = [pt.seg_min[seg], egress.cost if not n_w else far]
    upper = [np.full(n_x + n_e, np.inf)]
    n_ub = n_e
    if n_w:
        # w_i + x_v(s) - Y_vq <= 0 with Y_vq = v's replicas at the sites of cloud q (the model's near rows)
        n_ub = _near_gates(mi, egress, gated, cls, site, n_x + n_e, n_ub, (ub_rows, ub_cols, ub_vals, ub_rhs))
        cost.append(near[gated])
        upper.append(np.full(n_w, np.inf))
    n_var = n_x + n_e + n_w
    capped = classes[cols.spot_cap[classes] < cols.replicas[classes]]
    spot_x = np.flatnonzero(np.isin(cls, capped) & cols.seg_spot[seg])
    if len(capped):  # spot caps
        ub_rows.append(n_ub + np.searchsorted(capped, cls[spot_x]))
        ub_cols.append(spot_x)
        ub_vals.append(np.ones(len(spot_x)))
        ub_rhs.append(cols.spot_cap[capped])
        n_ub += len(capped)
    spread = np.array([c for c in classes.tolist() if mi.classes[c].min_sites > 1], dtype=np.int64)
    if len(spread):  # z_cs <= x_c(s), z_cs <= K_c, sum_s z_cs >= m_c K_c
        zc, zs = np.unique(np.c_[cls, site][np.isin(cls, spread)], axis=0).T
        n_z = len(zc)
        i_z, x_z = at(zc, zs)
        z_col = n_var + np.arange(n_z)
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


def _near_gates(
    mi: ModelInput,
    egress: EgressColumns,
    gated: IntArray,
    cls: IntArray,
    site: IntArray,
    w0: int,
    n_ub: int,
    parts: tuple[list[IntArray], list[IntArray], list[FloatArray], list[FloatArray]],
) -> int:
    """Rows w_i <= (v's replicas at the sites of s's cloud other than s) for the egress columns
    `gated` (w_i: column w0 + i): the layout's near rows, so k's traffic leaves at its cloud's
    own rate only as far as v runs elsewhere in that cloud. Appended to `parts`; the new row count."""
    rows, cols, vals, rhs = parts
    prov = mi.site_provider
    n_clouds = int(prov.max()) + 1
    key = cls * n_clouds + prov[site]
    order = np.argsort(key, kind="stable")
    v, s = egress.v[gated], egress.site[gated]
    want = v * n_clouds + prov[s]
    lo = np.searchsorted(key[order], want)
    hi = np.searchsorted(key[order], want, side="right")
    gate = np.repeat(np.arange(len(gated)), hi - lo)
    x = order[ranges(lo, hi - lo)]
    elsewhere = site[x] != s[gate]
    rows += [n_ub + np.arange(len(gated)), n_ub + gate[elsewhere]]
    cols += [w0 + np.arange(len(gated)), x[elsewhere]]
    vals += [np.ones(len(gated)), -np.ones(int(elsewhere.sum()))]
    rhs.append(np.zeros(len(gated)))
    return n_ub + len(gated)
