"""The placement model as sparse arrays, solved by HiGHS (highspy).

Columns: nodes per pool n_p (integer, <= max_nodes), replicas of class c on
pool p x_cp (integer), spread variables z_cs (class c's distinct-site slots at
site s, 0 <= z <= K_c) and egress fractions e_ks. Rows:

    demand     sum_p x_cp = R_c
    capacity   sum_c d_cr x_cp <= cap_pr n_p          (the contract's aggregate rule)
    fit        x_cp <= fit_cp n_p                     (a replica runs on one node; only
                                                       where stronger than capacity)
    spot       sum_{p spot} x_cp <= spot cap
    spread     z_cs <= sum_{p at s} x_cp,  sum_s z_cs >= m_c K_c
    egress     e_ks >= x_k(s)/R_k - x_v(s)/R_v        (traffic of k its peer v cannot
                                                       absorb at s leaves the site)

The model is built over a restricted set of pools; the rows and columns that do
not depend on the pools (demand, spot, spread, egress) have fixed positions, so
the duals of a restricted LP price *every* candidate pool of the catalog
(pricing.py). Everything is built with numpy/scipy arrays: a 20,000-workload
model is assembled in well under a second, where per-variable Python APIs
took many seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse as sp

from broker.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.classes import SPOT, WorkloadClass
from broker.solver.problem import GIB_IN_GB

INF = highspy.kHighsInf


@dataclass
class ModelInput:
    classes: list[WorkloadClass]
    node_cost: FloatArray  # objective cost per node, all pools
    price: FloatArray
    vcpus: FloatArray
    mem: FloatArray
    gpus: FloatArray
    max_nodes: FloatArray
    site_idx: IntArray
    cap_idx: IntArray
    egress: FloatArray  # [site, site] USD/GB
    cost_weight: float
    n_sites: int
    pool_ids: tuple[str, ...] = ()
    # stability: replicas running now per (class, pool), what a move costs per hour, a cap on moves
    keep_class: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    keep_pool: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    keep_cur: FloatArray = field(default_factory=lambda: np.zeros(0))
    move_cost: float = 0.0  # objective cost per moved replica and hour (migration cost / horizon)
    current_total: float = 0.0  # replicas running now, including those whose pool is gone
    max_moves: int | None = None

    @property
    def n_pools(self) -> int:
        return len(self.price)


@dataclass
class Layout:
    """Positions of the pool-independent rows and columns (fixed for one request)."""

    n_classes: int
    spot_row: IntArray  # per class, -1 = no cap
    z_class: IntArray  # per z column
    z_site: IntArray
    z_key: IntArray  # class * n_sites + site, sorted
    spread_total_row: IntArray  # per class, -1 = no spread
    node_row0: int  # first of the rows sum_{p at s} n_p >= z_cs / K_c (one per z column)
    e_class: IntArray  # per egress column: class k
    e_peer: IntArray  # class v
    e_site: IntArray
    e_cost: FloatArray
    e_keys_k: IntArray  # k * n_sites + s per egress column
    e_keys_v: IntArray  # v * n_sites + s per egress column
    n_fixed_rows: int
    row_lo: FloatArray
    row_hi: FloatArray
    e_row0: int
    keep_row0: int  # rows k_i - x_cp <= 0, one per keep column
    moves_row: int  # -sum k <= -(current - max_moves), -1 = no cap
    keep_key: IntArray  # class * n_pools + pool per keep column

    @property
    def n_z(self) -> int:
        return len(self.z_class)

    @property
    def n_e(self) -> int:
        return len(self.e_class)


def make_layout(mi: ModelInput) -> Layout:
    cls = mi.classes
    nc, ns = len(cls), mi.n_sites
    lo: list[float] = [float(c.replicas) for c in cls]
    hi: list[float] = [float(c.replicas) for c in cls]
    spot_row = np.full(nc, -1, dtype=np.int64)
    for i, c in enumerate(cls):
        if c.spot_cap is not None and (mi.cap_idx[c.cand] == SPOT).any():
            spot_row[i] = len(lo)
            lo.append(-INF)
            hi.append(float(c.spot_cap))
    z_class: list[IntArray] = []
    z_site: list[IntArray] = []
    for i, c in enumerate(cls):
        if c.min_sites > 1:
            sites = np.unique(mi.site_idx[c.cand])
            z_class.append(np.full(len(sites), i, dtype=np.int64))
            z_site.append(sites)
    zc = np.concatenate(z_class) if z_class else np.zeros(0, dtype=np.int64)
    zs = np.concatenate(z_site) if z_site else np.zeros(0, dtype=np.int64)
    lo += [-INF] * len(zc)
    hi += [0.0] * len(zc)
    total_row = np.full(nc, -1, dtype=np.int64)
    for i, c in enumerate(cls):
        if c.min_sites > 1:
            total_row[i] = len(lo)
            lo.append(-INF)
            hi.append(-float(c.min_sites * c.size))
    # a site that gives class c distinct-site slots runs at least one node c may use
    node_row0 = len(lo)
    lo += [0.0] * len(zc)
    hi += [INF] * len(zc)
    ek: list[int] = []
    ev: list[int] = []
    es: list[int] = []
    ecost: list[float] = []
    for k, c in enumerate(cls):
        for v, gib in c.deps:
            my_sites = np.unique(mi.site_idx[c.cand])
            their_sites = np.unique(mi.site_idx[cls[v].cand])
            for s in my_sites:
                others = their_sites[their_sites != s]
                if len(others) == 0:
                    continue
                # the cheapest way out: never above what the dearest used destination costs
                price = float(mi.egress[s, others].min())
                cost = mi.cost_weight * gib * GIB_IN_GB * price
                if cost <= 0:
                    continue
                ek.append(k)
                ev.append(v)
                es.append(int(s))
                ecost.append(cost)
    e_row0 = len(lo)
    lo += [0.0] * len(ek)
    hi += [INF] * len(ek)
    keep_row0 = len(lo)
    nk = len(mi.keep_class)
    lo += [-INF] * nk
    hi += [0.0] * nk
    moves_row = -1
    if mi.max_moves is not None and nk:
        moves_row = len(lo)
        lo.append(-INF)
        hi.append(-(mi.current_total - mi.max_moves))
    e_class = np.array(ek, dtype=np.int64)
    e_peer = np.array(ev, dtype=np.int64)
    e_site = np.array(es, dtype=np.int64)
    return Layout(
        n_classes=nc,
        spot_row=spot_row,
        z_class=zc,
        z_site=zs,
        z_key=zc * ns + zs,
        spread_total_row=total_row,
        node_row0=node_row0,
        e_class=e_class,
        e_peer=e_peer,
        e_site=e_site,
        e_cost=np.array(ecost, dtype=np.float64),
        e_keys_k=e_class * ns + e_site,
        e_keys_v=e_peer * ns + e_site,
        n_fixed_rows=len(lo),
        row_lo=np.array(lo, dtype=np.float64),
        row_hi=np.array(hi, dtype=np.float64),
        e_row0=e_row0,
        keep_row0=keep_row0,
        moves_row=moves_row,
        keep_key=mi.keep_class * mi.n_pools + mi.keep_pool,
    )


@dataclass
class XColumns:
    """Replica columns (class, pool) with their entries in the fixed rows."""

    cls: IntArray
    pool: IntArray
    cost: FloatArray
    fit: FloatArray
    fit_cut: BoolArray
    zpos: IntArray  # z column of (class, site of pool), -1 = none
    fixed: sp.csc_matrix = field(repr=False)  # [n_fixed_rows, n_x]

    def subset(self, sel: IntArray) -> XColumns:
        return XColumns(
            cls=self.cls[sel],
            pool=self.pool[sel],
            cost=self.cost[sel],
            fit=self.fit[sel],
            fit_cut=self.fit_cut[sel],
            zpos=self.zpos[sel],
            fixed=self.fixed[:, sel],
        )


def x_columns(mi: ModelInput, lay: Layout) -> XColumns:
    """Every candidate (class, pool) column with its entries in the fixed rows, by class then pool."""
    n_each = [len(c.cand) for c in mi.classes]
    xc = np.repeat(np.arange(len(mi.classes), dtype=np.int64), n_each)
    xp = np.concatenate([c.cand for c in mi.classes])
    n = len(xc)
    cols = np.arange(n)
    rows = [xc]
    vals = [np.ones(n)]
    ccols = [cols]
    spot = (lay.spot_row[xc] >= 0) & (mi.cap_idx[xp] == SPOT)
    rows.append(lay.spot_row[xc][spot])
    vals.append(np.ones(int(spot.sum())))
    ccols.append(cols[spot])
    ns = mi.n_sites
    key = xc * ns + mi.site_idx[xp]
    zpos = np.full(n, -1, dtype=np.int64)
    if lay.n_z:
        pos = np.searchsorted(lay.z_key, key)
        pos = np.minimum(pos, lay.n_z - 1)
        hit = lay.z_key[pos] == key
        zpos[hit] = pos[hit]
        rows.append(lay.n_classes + int((lay.spot_row >= 0).sum()) + pos[hit])
        vals.append(-np.ones(int(hit.sum())))
        ccols.append(cols[hit])
    if lay.n_e:
        e_row0 = lay.e_row0
        replicas = np.array([c.replicas for c in mi.classes], dtype=np.float64)
        for keys, owner, sign in ((lay.e_keys_k, lay.e_class, -1.0), (lay.e_keys_v, lay.e_peer, 1.0)):
            # join x columns to egress columns on (class, site); a key can meet several egress columns
            order = np.argsort(keys, kind="stable")
            sk = keys[order]
            lo_i = np.searchsorted(sk, key, side="left")
            cnt = np.searchsorted(sk, key, side="right") - lo_i
            xi = np.repeat(cols, cnt)
            offs = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            e = order[lo_i[xi] + offs]
            rows.append(e_row0 + e)
            ccols.append(xi)
            # in e - x_k/R_k + x_v/R_v >= 0: the sender's replicas push traffic out
            vals.append(sign / replicas[owner[e]])
    if len(lay.keep_key):
        # k_i - x_cp <= 0: a replica counts as kept only where it still runs
        xkey = xc * mi.n_pools + xp
        pos = np.searchsorted(xkey, lay.keep_key)  # universe keys are sorted: class, then pool
        pos = np.minimum(pos, max(n - 1, 0))
        hit = (xkey[pos] == lay.keep_key) if n else np.zeros(len(pos), dtype=bool)
        rows.append(lay.keep_row0 + np.flatnonzero(hit))
        ccols.append(pos[hit])
        vals.append(-np.ones(int(hit.sum())))
    fixed = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(ccols))),
        shape=(lay.n_fixed_rows, n),
    )
    return XColumns(
        cls=xc,
        pool=xp,
        cost=np.concatenate([c.rep_cost for c in mi.classes]),
        fit=np.concatenate([c.fit for c in mi.classes]),
        fit_cut=np.concatenate([c.fit_cut for c in mi.classes]),
        zpos=zpos,
        fixed=fixed,
    )


@dataclass
class Built:
    pools: IntArray  # restricted pools, sorted
    x: XColumns
    n_cols: int
    lay: Layout
    cap_row: IntArray  # [pool position, resource] -> row, -1 = none

    @property
    def x_off(self) -> int:
        return len(self.pools)

    @property
    def z_off(self) -> int:
        return len(self.pools) + len(self.x.cls)

    @property
    def e_off(self) -> int:
        return self.z_off + self.lay.n_z

    @property
    def k_off(self) -> int:
        return self.e_off + self.lay.n_e


def build(
    mi: ModelInput,
    lay: Layout,
    universe: XColumns,
    sel: IntArray,
    pools: IntArray,
    *,
    integer: bool,
    fit_rows: bool = True,
) -> tuple[highspy.Highs, Built]:
    """The model over universe columns `sel` (sorted) and `pools` (which must cover their pools)."""
    pools = np.unique(np.concatenate([pools, universe.pool[sel]]))
    xs = universe.subset(sel)
    npool, nx = len(pools), len(xs.cls)
    ppos = np.full(mi.n_pools, -1, dtype=np.int64)
    ppos[pools] = np.arange(npool)
    xpos = ppos[xs.pool]

    # pool rows: capacity per (pool, resource) where some replica needs the resource
    d = np.stack([c.demand for c in mi.classes]) if mi.classes else np.zeros((0, 3))
    caps = np.stack([mi.vcpus[pools], mi.mem[pools], mi.gpus[pools]], axis=1)
    r_rows, r_cols, r_vals = [], [], []
    nrow = lay.n_fixed_rows
    cap_row = np.full((npool, 3), -1, dtype=np.int64)
    for r in range(3):
        need = d[xs.cls, r]
        use = need > 0
        if not use.any():
            continue
        used_pools = np.unique(xpos[use])
        row_of = np.full(npool, -1, dtype=np.int64)
        row_of[used_pools] = nrow + np.arange(len(used_pools))
        cap_row[:, r] = row_of
        r_rows += [row_of[xpos[use]], row_of[used_pools]]
        r_cols += [npool + np.flatnonzero(use), used_pools]
        r_vals += [need[use], -caps[used_pools, r]]
        nrow += len(used_pools)
    cut = np.flatnonzero(xs.fit_cut) if fit_rows else np.zeros(0, dtype=np.int64)
    if len(cut):
        rows = nrow + np.arange(len(cut))
        r_rows += [rows, rows]
        r_cols += [npool + cut, xpos[cut]]
        r_vals += [np.ones(len(cut)), -xs.fit[cut]]
        nrow += len(cut)
    pool_part = sp.csc_matrix(
        (
            np.concatenate(r_vals) if r_vals else np.zeros(0),
            (
                np.concatenate(r_rows) if r_rows else np.zeros(0, dtype=np.int64),
                np.concatenate(r_cols) if r_cols else np.zeros(0, dtype=np.int64),
            ),
        ),
        shape=(nrow, npool + nx),
    )
    nz, ne = lay.n_z, lay.n_e
    nk = len(lay.keep_key)
    ncol = npool + nx + nz + ne + nk
    # fixed rows: x entries plus z and e columns
    zc = np.arange(nz)
    z_rows = lay.n_classes + int((lay.spot_row >= 0).sum()) + zc
    e_row0 = lay.e_row0
    z_size = np.array([float(mi.classes[int(c)].size) for c in lay.z_class])
    kc = nz + ne + np.arange(nk)
    moves = lay.moves_row >= 0
    fz = sp.csc_matrix(
        (
            np.concatenate(
                [np.ones(nz), -np.ones(nz), -1.0 / z_size, np.ones(ne), np.ones(nk), -np.ones(nk if moves else 0)]
            ),
            (
                np.concatenate(
                    [
                        z_rows,
                        lay.spread_total_row[lay.z_class],
                        lay.node_row0 + zc,
                        e_row0 + np.arange(ne),
                        lay.keep_row0 + np.arange(nk),
                        np.full(nk if moves else 0, lay.moves_row),
                    ]
                ),
                np.concatenate([zc, zc, zc, nz + np.arange(ne), kc, kc if moves else kc[:0]]),
            ),
        ),
        shape=(lay.n_fixed_rows, nz + ne + nk),
    )
    has_z = np.flatnonzero(xs.zpos >= 0)
    fn = sp.csc_matrix(
        (np.ones(len(has_z)), (lay.node_row0 + xs.zpos[has_z], xpos[has_z])),
        shape=(lay.n_fixed_rows, npool),
    )
    fixed = sp.hstack([fn, xs.fixed, fz], format="csc")
    pool_rows = sp.hstack([pool_part[lay.n_fixed_rows :, :], sp.csc_matrix((nrow - lay.n_fixed_rows, nz + ne + nk))])
    a = sp.vstack([fixed, pool_rows], format="csc")
    n_pool_rows = nrow - lay.n_fixed_rows
    row_lo = np.concatenate([lay.row_lo, np.full(n_pool_rows, -INF)])
    row_hi = np.concatenate([lay.row_hi, np.zeros(n_pool_rows)])
    z_ub = np.array([float(mi.classes[int(c)].size) for c in lay.z_class], dtype=np.float64)
    x_ub = np.array([float(c.replicas) for c in mi.classes], dtype=np.float64)[xs.cls] if nx else np.zeros(0)
    col_lo = np.zeros(ncol)
    col_hi = np.concatenate(
        [np.where(np.isinf(mi.max_nodes[pools]), INF, mi.max_nodes[pools]), x_ub, z_ub, np.full(ne, INF), mi.keep_cur]
    )
    cost = np.concatenate([mi.node_cost[pools], xs.cost, np.zeros(nz), lay.e_cost, np.full(nk, -mi.move_cost)])

    lp = highspy.HighsLp()
    lp.num_col_ = ncol
    lp.offset_ = mi.move_cost * mi.current_total  # moved = current - kept
    lp.num_row_ = a.shape[0]
    lp.col_cost_ = cost
    lp.col_lower_ = col_lo
    lp.col_upper_ = col_hi
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data.astype(np.float64)
    lp.a_matrix_.num_col_ = ncol
    lp.a_matrix_.num_row_ = a.shape[0]
    if integer:
        kinds = [highspy.HighsVarType.kInteger] * (npool + nx) + [highspy.HighsVarType.kContinuous] * (nz + ne + nk)
        lp.integrality_ = kinds
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    return h, Built(pools=pools, x=xs, n_cols=ncol, lay=lay, cap_row=cap_row)


@dataclass
class LPResult:
    value: float
    row_dual: FloatArray
    x: FloatArray  # per restricted x column
    n: FloatArray  # per restricted pool


def solve_lp(h: highspy.Highs, b: Built) -> LPResult | None:
    h.setOptionValue("solver", "simplex")
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    sol = h.getSolution()
    col = np.asarray(sol.col_value)
    return LPResult(
        value=float(h.getInfo().objective_function_value),
        row_dual=np.asarray(sol.row_dual),
        x=col[b.x_off : b.z_off],
        n=col[: b.x_off],
    )


@dataclass
class MIPResult:
    status: str  # optimal | feasible | infeasible | unknown
    value: float
    bound: float
    x: FloatArray
    n: FloatArray


def solve_mip(
    h: highspy.Highs,
    b: Built,
    *,
    time_limit_s: float,
    seed: int,
    hint: FloatArray | None,
    rel_gap: float,
) -> MIPResult:
    h.setOptionValue("time_limit", max(0.05, time_limit_s))
    h.setOptionValue("mip_rel_gap", rel_gap)
    h.setOptionValue("random_seed", int(seed))
    if hint is not None:
        h.setSolution(len(hint), np.arange(len(hint), dtype=np.int32), hint.astype(np.float64))
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    if status == highspy.HighsModelStatus.kInfeasible:
        return MIPResult("infeasible", math.inf, math.inf, np.zeros(0), np.zeros(0))
    if info.primal_solution_status != 2:  # kSolutionStatusFeasible
        return MIPResult("unknown", math.inf, float(info.mip_dual_bound), np.zeros(0), np.zeros(0))
    col = np.asarray(h.getSolution().col_value)
    return MIPResult(
        "optimal" if status == highspy.HighsModelStatus.kOptimal else "feasible",
        float(info.objective_function_value),
        float(info.mip_dual_bound),
        np.round(col[b.x_off : b.z_off]),
        np.round(col[: b.x_off]),
    )
