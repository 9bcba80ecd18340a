"""The Lagrangian bound: a lower bound valid for the whole catalog from any round of column
generation.

The restricted LP's duals give a Lagrangian relaxation of the full-catalog model: the demand
rows are kept, every other row is dualised with multipliers of the valid sign (the fixed rows
at the LP's duals, each pool's capacity rows with per-pool resource weights, the fit rows of the
restricted model at their duals), and minimising over the demand rows prices each class at
`R_c * min_p coef_cp` over EVERY candidate pool, in the model or not. It equals z_LP at
convergence and can exceed the full LP before. docs/solver-proof.md derives it and says why
it is valid whatever the multipliers.

Which capacity multipliers per pool: the LP's capacity-row duals for pools in the restricted
model (as they are, with their fit-row duals, or scaled so that the node term is 0), and for
every pool a few resource directions (the in-model average at the same site, the in-model
global average, cpu, memory, half-half, gpu). Each is scored per pool by how far it drags the
pool's columns below the class's LP dual and the best one is kept; any choice is valid, the
score only makes it tight. Which fixed-row multipliers: far from convergence the LP's duals of
a class's spread, spot and egress rows can cost more than they earn, so the bound is evaluated
with every class's rows at the LP's duals, with none of them, and with a per-class mix, and the
best of the three is returned.

Pure numpy over the universe (a few passes in chunks); nothing here changes the model.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.bounds.lagrangian_multipliers import CANDIDATES, Multipliers, candidates
from broker.solver.model.layout import Layout, ModelInput
from broker.solver.model.master import Master
from broker.solver.model.universe import Universe

CHUNK = 1 << 19  # universe columns per numpy pass (keeps temporaries to a few MB)


@dataclass
class BoundDetail:
    value: float
    chosen: dict[str, int]  # universe pools per multiplier candidate
    node_penalty: float = 0.0  # what the node terms cost (<= 0)
    lp_share: float = 1.0  # share of the classes whose rows kept the LP's duals


@dataclass
class _Cols:
    """What every pass over the universe reads; pools are numbered 0..P-1 (universe pools)."""

    uni: Universe
    local: IntArray  # catalog pool -> universe pool number (-1 = none)
    g: FloatArray  # cost - A^T y per universe column (no capacity or fit multipliers)
    demand: FloatArray
    replicas: FloatArray
    target: FloatArray  # the classes' demand duals: what a replica costs in the LP
    inside: BoolArray  # universe columns in the restricted model
    xc: IntArray  # those columns' class, pool number, g and fit-row dual
    xp: IntArray
    g_in: FloatArray
    phi: FloatArray


def lagrangian_bound(
    mi: ModelInput,
    universe: Universe,
    m: Master,
    row_dual: FloatArray,
    col_dual: FloatArray | None = None,
) -> float:
    """A lower bound on the optimum over the whole catalog (-inf when none follows).

    row_dual/col_dual: the restricted LP's duals (HiGHS' sign convention, minimisation);
    col_dual defaults to the master's current solution."""
    return lagrangian_bound_detail(mi, universe, m, row_dual, col_dual).value


def lagrangian_bound_detail(
    mi: ModelInput,
    universe: Universe,
    m: Master,
    row_dual: FloatArray,
    col_dual: FloatArray | None = None,
) -> BoundDetail:
    """The bound at the LP's multipliers, at none of the fixed rows' multipliers, and at a
    per-class mix of the two (whichever class did better), the best of the three.

    Far from convergence the LP's duals of a class's spread, spot and egress rows can cost
    more than they earn; scaling a class's rows by 0 gives up only that class's part."""
    lay = m.lay
    nc = lay.n_classes
    u = universe.cols
    if nc == 0 or (np.diff(u.starts) == 0).any():
        return BoundDetail(-math.inf, {})
    if col_dual is None:
        col_dual = np.asarray(m.h.getSolution().col_dual)
    full, per_full = _evaluate(mi, universe, m, row_dual, col_dual, np.ones(nc))
    plain, per_plain = _evaluate(mi, universe, m, row_dual, col_dual, np.zeros(nc))
    best = max((full, plain), key=lambda d: d.value)
    lam = (per_full >= per_plain).astype(np.float64)
    if 0 < lam.sum() < nc:
        mixed, _ = _evaluate(mi, universe, m, row_dual, col_dual, lam)
        best = max((best, mixed), key=lambda d: d.value)
    return best


def _row_owner(mi: ModelInput, lay: Layout) -> IntArray:
    """The class each fixed row belongs to (-1: the moves cap); egress rows: the sender."""
    owner = np.full(lay.n_fixed_rows, -1, dtype=np.int64)
    nc = lay.n_classes
    owner[:nc] = np.arange(nc)
    spot = np.flatnonzero(lay.spot_row >= 0)
    owner[lay.spot_row[spot]] = spot
    nz = lay.n_z
    owner[nc + len(spot) + np.arange(nz)] = lay.z_class
    total = np.flatnonzero(lay.spread_total_row >= 0)
    owner[lay.spread_total_row[total]] = total
    owner[lay.node_row0 + np.arange(nz)] = lay.z_class
    owner[lay.e_row0 + np.arange(lay.n_e)] = lay.e_class
    owner[lay.near_row0 + np.arange(lay.n_near)] = lay.e_class[lay.near_e]
    owner[lay.y_row0 + np.arange(lay.n_y)] = lay.y_class
    owner[lay.keep_row0 + np.arange(len(lay.keep_key))] = mi.keep_class
    return owner


def _evaluate(
    mi: ModelInput,
    universe: Universe,
    m: Master,
    row_dual: FloatArray,
    col_dual: FloatArray,
    lam: FloatArray,
) -> tuple[BoundDetail, FloatArray]:
    """The bound with class c's fixed rows dualised at lam_c times the LP's duals, and each
    class's share of it (its replicas' minima, its rows' constants and columns' terms)."""
    u = universe.cols
    lay = m.lay
    nf, nc = lay.n_fixed_rows, lay.n_classes
    none = BoundDetail(-math.inf, {}), np.full(nc, -np.inf)
    y_raw = np.asarray(row_dual, dtype=np.float64)
    y = _valid_sign(y_raw[:nf], lay.row_lo, lay.row_hi)
    y[:nc] = 0.0  # the demand rows are kept
    owner = _row_owner(mi, lay)
    scale = np.where(owner >= 0, lam[np.maximum(owner, 0)], 1.0)
    egress = lay.e_row0 + np.arange(lay.n_e)  # the receiver's coefficients move too
    scale[egress] = np.minimum(lam[lay.e_class], lam[lay.e_peer])
    near_e = lay.near_e
    scale[lay.near_row0 + np.arange(lay.n_near)] = np.minimum(lam[lay.e_class[near_e]], lam[lay.e_peer[near_e]])
    y *= scale
    rhs = np.where(y < 0, lay.row_hi, np.where(y > 0, lay.row_lo, 0.0))
    per_class = _per_pool(np.maximum(owner, 0), np.where(owner >= 0, y * rhs, 0.0), nc)
    cols_term, cols_per_class = _fixed_columns_term(mi, lay, y)
    per_class += cols_per_class
    value = _offset(m) + float(y @ rhs) + cols_term
    if not math.isfinite(value):
        return none

    pools = universe.seg_pool  # every pool some class may use
    n_p = len(pools)
    local = np.full(mi.n_pools, -1, dtype=np.int64)
    local[pools] = np.arange(n_p)
    demand = m.demand
    cap = np.stack([mi.vcpus[pools], mi.mem[pools], mi.gpus[pools]], axis=1).astype(np.float64)
    node_cost = mi.node_cost[pools]
    max_nodes = mi.max_nodes[pools]
    zpos = u.zpos(slice(None))
    has_z = zpos >= 0
    credit = _per_pool(local[u.pool[has_z]], y[lay.node_row0 + zpos[has_z]], n_p)

    # the restricted LP's capacity and fit-row duals
    mu_raw = np.zeros((n_p, 3))
    for r in range(3):
        rows = m.cap_row[pools, r]
        on = rows >= 0
        mu_raw[on, r] = y_raw[rows[on]]
    mu_lp = np.maximum(-mu_raw, 0.0)
    xi = m.x_uni
    xc, xp = u.cls(xi), local[u.pool[xi]]
    fit = m.x_fit  # the fit rows as the model holds them
    phi = np.zeros(len(xi))
    cut = np.flatnonzero(m.fit_row >= 0)
    if len(cut):
        cd = np.asarray(col_dual, dtype=np.float64)[m.x_col[cut]]
        ci = xi[cut]
        # HiGHS: col_dual = cost - A^T y over all rows; the fit row's dual is what is left
        plain = -u.earnings(y_raw[:nf])[u.group[ci]] - (demand[xc[cut]] * mu_raw[xp[cut]]).sum(axis=1)
        # the large-replica rows are dualised at 0 here (valid: any multiplier >= 0 is), so their
        # part of the column's dual is not the fit row's
        plain -= m.large_dual_terms(y_raw, xc[cut], u.pool[ci])
        phi[cut] = np.maximum(cd - plain, 0.0)
    fitphi = _per_pool(xp, phi * fit, n_p)
    g = -u.earnings(y)[u.group]
    cols = _Cols(universe, local, g, demand, m.replicas, y_raw[:nc], m.in_model, xc, xp, g[xi], phi)

    # per candidate and pool: the node term (no shift) or the shift variant, scored
    inpool = m.pool_col[pools] >= 0
    cands = candidates(mi.site_idx[pools], mi.n_sites, inpool, cap, node_cost - credit, mu_lp, fitphi)
    k_n = len(cands)
    scores = np.full((2 * k_n, n_p), -np.inf)
    nterms = np.zeros((k_n, n_p))
    shifts = np.zeros((k_n, n_p))
    zero = np.zeros(n_p)
    # candidates valid on most pools share one pass over the universe; the others (the LP's,
    # on the restricted model's pools; gpu) read only their pools' columns
    wide = [k for k, c in enumerate(cands) if c.valid.mean() >= 0.25]
    drags = dict(zip(wide, _drag_many(cols, [cands[k] for k in wide]), strict=True))
    for k, cand in enumerate(cands):
        a = node_cost - (cap * cand.mu).sum(axis=1) - cand.phi_scale * fitphi
        rcn = a - credit
        nterms[k] = _node_term(a, credit, max_nodes)
        drag = drags[k] if k in drags else _drag(cols, cand, zero, cand.valid)
        scores[k] = np.where(cand.valid, nterms[k] + drag, -np.inf)
        neg = cand.valid & (rcn < 0) & (node_cost >= 0)
        if neg.any():  # rcn * sum_c x_cp in the pool's x coefficients instead
            shifts[k] = np.where(neg, rcn, 0.0)
            scores[k_n + k] = np.where(neg, _drag(cols, cand, shifts[k], neg), -np.inf)
    best = np.argmax(scores, axis=0)
    pick = np.arange(n_p)
    if not np.isfinite(scores[best, pick]).all():
        return none
    by_shift = best >= k_n
    kk = best % k_n
    mu = np.stack([c.mu for c in cands])[kk, pick]
    phi_scale = np.stack([c.phi_scale for c in cands])[kk, pick]
    shift = np.where(by_shift, shifts[kk, pick], 0.0)
    penalty = float(np.where(by_shift, 0.0, nterms[kk, pick]).sum())
    share = cols.replicas * _class_minima(cols, mu, phi_scale, shift, nc)
    value += penalty + float(share.sum())
    counts = np.bincount(kk, minlength=k_n)
    chosen = {name: int(n) for name, n in zip(CANDIDATES, counts, strict=True) if n}
    return BoundDetail(value, chosen, penalty, float(lam.mean())), per_class + share


def _per_pool(pool: IntArray, weights: FloatArray, n_p: int) -> FloatArray:
    out: FloatArray = np.bincount(pool, weights=weights, minlength=n_p).astype(np.float64)
    return out


def _node_term(a: FloatArray, credit: FloatArray, max_nodes: FloatArray) -> FloatArray:
    """min over 0 <= n <= max_nodes of a n - credit min(n, 1) (-inf when unbounded).

    A site's node row only needs one node: sum_{q at s} min(n_q, 1) >= z_cs / K_c holds
    wherever the row does (z_cs <= K_c), so a pool earns its credit at most once."""
    finite = np.isfinite(max_nodes)
    top = np.where(finite, max_nodes, 1.0)
    at_top = np.minimum(0.0, a * top - credit * np.minimum(top, 1.0))
    out: FloatArray = np.where(a < 0, np.where(finite, at_top, -np.inf), np.minimum(0.0, a - credit))
    return out


def _drag(cols: _Cols, cand: Multipliers, shift: FloatArray, pools: BoolArray | None) -> FloatArray:
    """Per pool: sum_c R_c min(0, coef_cp - y_c) over its columns (only `pools` when given)."""
    u = cols.uni.cols
    n_p = len(shift)
    out = np.zeros(n_p)
    for idx in _column_sets(cols.uni, pools):
        cls, pool = u.cls(idx), cols.local[u.pool[idx]]
        coef = cols.g[idx] + shift[pool] + _mu_dot(cand.mu, cols.demand, pool, cls)
        drag = cols.replicas[cls] * np.minimum(coef - cols.target[cls], 0.0)
        drag[cols.inside[idx]] = 0.0
        out += np.bincount(pool, weights=drag, minlength=n_p)
    xc, xp = cols.xc, cols.xp
    coef_in = cols.g_in + shift[xp] + _mu_dot(cand.mu, cols.demand, xp, xc) + cand.phi_scale[xp] * cols.phi
    drag_in = cols.replicas[xc] * np.minimum(coef_in - cols.target[xc], 0.0)
    if pools is not None:
        drag_in[~pools[xp]] = 0.0
    out += np.bincount(xp, weights=drag_in, minlength=n_p)
    return out


def _drag_many(cols: _Cols, cands: list[Multipliers]) -> list[FloatArray]:
    """_drag of several candidates (no shift, every pool) in one pass over the universe."""
    u = cols.uni.cols
    n_p = len(cols.uni.seg_pool)
    out = [np.zeros(n_p) for _ in cands]
    gpu = bool(cols.demand[:, 2].any())
    for idx in _column_sets(cols.uni, None):
        cls, pool = u.cls(idx), cols.local[u.pool[idx]]
        base = cols.g[idx] - cols.target[cls]
        weight = np.where(cols.inside[idx], 0.0, cols.replicas[cls])
        d0, d1 = cols.demand[cls, 0], cols.demand[cls, 1]
        d2 = cols.demand[cls, 2] if gpu else None
        for k, cand in enumerate(cands):
            coef = base + cand.mu[pool, 0] * d0
            coef += cand.mu[pool, 1] * d1
            if d2 is not None:
                coef += cand.mu[pool, 2] * d2
            out[k] += np.bincount(pool, weights=weight * np.minimum(coef, 0.0), minlength=n_p)
    xc, xp = cols.xc, cols.xp
    for k, cand in enumerate(cands):
        coef_in = cols.g_in + _mu_dot(cand.mu, cols.demand, xp, xc) + cand.phi_scale[xp] * cols.phi
        out[k] += np.bincount(xp, weights=cols.replicas[xc] * np.minimum(coef_in - cols.target[xc], 0.0), minlength=n_p)
    return out


def _class_minima(cols: _Cols, mu: FloatArray, phi_scale: FloatArray, shift: FloatArray, nc: int) -> FloatArray:
    u = cols.uni.cols
    cmin = np.full(nc, np.inf)
    for idx in _column_sets(cols.uni, None):
        cls, pool = u.cls(idx), cols.local[u.pool[idx]]
        coef = cols.g[idx] + shift[pool] + _mu_dot(mu, cols.demand, pool, cls)
        coef[cols.inside[idx]] = np.inf
        _class_min(cmin, cls, coef)
    xc, xp = cols.xc, cols.xp
    coef_in = cols.g_in + shift[xp] + _mu_dot(mu, cols.demand, xp, xc) + phi_scale[xp] * cols.phi
    np.minimum.at(cmin, xc, coef_in)
    return cmin


def _valid_sign(y: FloatArray, lo: FloatArray, hi: FloatArray) -> FloatArray:
    """Duals clipped to the sign their row allows (<= rows: y <= 0, >= rows: y >= 0)."""
    out: FloatArray = np.where((y < 0) & np.isfinite(hi), y, 0.0) + np.where((y > 0) & np.isfinite(lo), y, 0.0)
    return out


def _offset(m: Master) -> float:
    return float(m.h.getObjectiveOffset()[1])


def _fixed_columns_term(mi: ModelInput, lay: Layout, y: FloatArray) -> tuple[float, FloatArray]:
    """sum over the z, e and keep columns of min over their bounds of rc_j * value_j, and
    per class (egress: the sender's)."""
    nz, ne, nk = lay.n_z, lay.n_e, len(lay.keep_key)
    nc = lay.n_classes
    per_class = np.zeros(nc)
    if nz:
        z_rows = lay.n_classes + int((lay.spot_row >= 0).sum()) + np.arange(nz)
        size = np.array([float(mi.classes[int(c)].size) for c in lay.z_class])
        rc = -(y[z_rows] - y[lay.spread_total_row[lay.z_class]] - y[lay.node_row0 + np.arange(nz)] / size)
        per_class += np.bincount(lay.z_class, weights=np.minimum(rc * size, 0.0), minlength=nc)
    if ne:
        rc = lay.e_cost - y[lay.e_row0 + np.arange(ne)]
        per_class += np.bincount(lay.e_class, weights=np.minimum(rc, 0.0), minlength=nc)  # 0 <= e <= 1
    if lay.n_near:
        # near columns (in the egress row and their near row, 0 <= a <= 1 at an optimum) and
        # Y columns (their own row, -1 in the near rows they gate, 0 <= Y <= R_v)
        near_rows = lay.near_row0 + np.arange(lay.n_near)
        rc = lay.near_cost - y[lay.e_row0 + lay.near_e] - y[near_rows]
        per_class += np.bincount(lay.e_class[lay.near_e], weights=np.minimum(rc, 0.0), minlength=nc)
        rc_y = -y[lay.y_row0 + np.arange(lay.n_y)] + np.bincount(lay.near_y, weights=y[near_rows], minlength=lay.n_y)
        r_v = np.array([float(mi.classes[int(v)].replicas) for v in lay.y_class])
        per_class += np.bincount(lay.y_class, weights=np.minimum(rc_y * r_v, 0.0), minlength=nc)
    if nk:
        rc = -mi.move_cost - y[lay.keep_row0 + np.arange(nk)]
        if lay.moves_row >= 0:
            rc = rc + y[lay.moves_row]
        per_class += np.bincount(mi.keep_class, weights=np.minimum(rc * mi.keep_cur, 0.0), minlength=nc)
    return float(per_class.sum()), per_class


def _mu_dot(mu: FloatArray, demand: FloatArray, pool: IntArray, cls: IntArray) -> FloatArray:
    out: FloatArray = mu[pool, 0] * demand[cls, 0] + mu[pool, 1] * demand[cls, 1]
    if demand[:, 2].any():
        out += mu[pool, 2] * demand[cls, 2]
    return out


def _class_min(cmin: FloatArray, cls: IntArray, coef: FloatArray) -> None:
    """cmin[c] = min(cmin[c], min coef over entries of class c); cls is sorted."""
    if len(cls) == 0:
        return
    starts = np.flatnonzero(np.r_[True, cls[1:] != cls[:-1]])
    seg = np.minimum.reduceat(coef, starts)
    ids = cls[starts]
    cmin[ids] = np.minimum(cmin[ids], seg)


def _column_sets(uni: Universe, pools: BoolArray | None) -> Iterator[IntArray | slice]:
    """Universe columns in chunks: all of them, or those of the (universe-numbered) pools in the mask."""
    n = uni.size
    if pools is None:
        for a in range(0, n, CHUNK):
            yield slice(a, min(n, a + CHUNK))
        return
    segs = np.flatnonzero(pools)  # universe pool k is segment k
    if len(segs) == 0:
        return
    cols = np.sort(uni.columns_on(uni.seg_pool[segs]))
    for a in range(0, len(cols), CHUNK):
        yield cols[a : a + CHUNK]
