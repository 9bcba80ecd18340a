"""The placement model as sparse arrays, solved by HiGHS (highspy).

Columns: nodes per pool n_p (integer, <= max_nodes), replicas of class c on
pool p x_cp (integer), spread variables z_cs (class c's distinct-site slots at
site s, 0 <= z <= K_c) and egress fractions e_ks. Rows:

    demand     sum_p x_cp = R_c
    capacity   sum_c d_cr x_cp <= cap_pr n_p          (the contract's aggregate rule)
    fit        x_cp <= fit_cp n_p                     (a replica runs on one node; only
                                                       where stronger than capacity, and in
                                                       an LP once its solution breaks it)
    large      sum_c w_cprk x_cp <= n_p               (k = 1, 2: replicas above half, or
                                                       above a third, of a node in resource r
                                                       share nodes only so far; w the dual-
                                                       feasible function u_k; where >= 2 classes)
    spot       sum_{p spot} x_cp <= spot cap
    spread     z_cs <= sum_{p at s} x_cp,  sum_s z_cs >= m_c K_c
    egress     e_ks + a_ks >= x_k(s)/R_k - x_v(s)/R_v (traffic of k its peer v cannot
                                                       absorb at s leaves the site)
    near       a_ks <= Y_vq - x_v(s)                  (it leaves at the same cloud's price
                                                       only if v runs elsewhere in it)

The model is grown over a restricted set of pools (master.py); the rows and
columns that do not depend on the pools (demand, spot, spread, egress) have fixed
positions, so the duals of a restricted LP price *every* candidate pool of the
catalog (reduced_costs.py). Everything is built with numpy/scipy arrays: per-variable
Python APIs took many times longer on big requests.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.model.patterns import PatternNodes
from broker.solver.prepare.classes import LARGE_REPLICA_KS, SPOT, WorkloadClass, large_replica_table, replica_fit
from broker.solver.problem import GIB_IN_GB

# per-column index arrays of the universe: 32-bit where they fit (tens of millions of columns)
Index = npt.NDArray[np.signedinteger[Any]]

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
    site_provider: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # empty: one tier
    arch_idx: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # per pool; empty: one
    # the large-replica rows for k = 1..large_replica_rows (valid for every packing): without
    # them the aggregate rule lets replicas above half (a third) of a node of different classes
    # share nodes, and exact packing pays for it afterwards
    large_replica_rows: int = LARGE_REPLICA_KS
    # exact node counts for pools several classes share (model/patterns.PatternNodes; None: the
    # aggregate, fit and large-replica counts only, as on big requests, where they cost too much)
    pattern_nodes: PatternNodes | None = None
    # the tenant's vCPU quotas per quota group (problem.family_quotas above 0): per pool its
    # group's index (-1: none; empty: no quotas), the vCPUs a node counts against it, each quota
    quota_of_pool: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    quota_node_vcpus: FloatArray = field(default_factory=lambda: np.zeros(0))
    quota_vcpus: FloatArray = field(default_factory=lambda: np.zeros(0))

    def quota_use(self, nodes: dict[int, int]) -> FloatArray:
        """vCPUs per quota group that `nodes` (pool -> count) run."""
        use = np.zeros(len(self.quota_vcpus))
        for p, n in nodes.items() if len(self.quota_vcpus) else ():
            g = int(self.quota_of_pool[p])
            if g >= 0:
                use[g] += n * float(self.quota_node_vcpus[p])
        return use

    @property
    def n_pools(self) -> int:
        return len(self.price)

    def restricted(self, cls: IntArray, pool: IntArray) -> ModelInput:
        """The same request with each class's candidates cut to the pairs (cls[i], pool[i]): a
        sub-MIP's model, whose spread and egress structure covers only the sites it offers
        (on big requests the full layout alone has hundreds of thousands of such columns)."""
        order = np.lexsort((pool, cls))
        c, p = np.asarray(cls)[order], np.asarray(pool)[order]
        bounds = np.searchsorted(c, np.arange(len(self.classes) + 1))
        classes = []
        for i, cl in enumerate(self.classes):
            mine = np.unique(p[bounds[i] : bounds[i + 1]])
            at = np.searchsorted(cl.cand, mine)
            classes.append(dataclasses.replace(cl, cand=cl.cand[at], rep_cost=cl.rep_cost[at]))
        offered = np.array(
            [np.isin(q, classes[k].cand).item() for k, q in zip(self.keep_class, self.keep_pool, strict=True)],
            dtype=bool,
        )
        return dataclasses.replace(
            self,
            classes=classes,
            keep_class=self.keep_class[offered],
            keep_pool=self.keep_pool[offered],
            keep_cur=self.keep_cur[offered],
        )

    @cached_property
    def class_demand(self) -> FloatArray:
        return np.stack([c.demand for c in self.classes]) if self.classes else np.zeros((0, 3))

    @cached_property
    def class_replicas(self) -> FloatArray:
        return np.array([float(c.replicas) for c in self.classes])

    @cached_property
    def class_per_node(self) -> FloatArray:
        """Per class: the replicas one node may run at most (spread.max_per_node; inf: no limit)."""
        return np.array([math.inf if c.w.max_per_node is None else float(c.w.max_per_node) for c in self.classes])

    def fit(self, cls: IntArray, pool: IntArray, *, capped: bool = True) -> tuple[npt.NDArray[np.float32], BoolArray]:
        """classes.replica_fit of the pairs (cls[i], pool[i]); capped=False: not capped at the
        class's replicas (the rows a used pool's first node adds are left out)."""
        d = self.class_demand[cls]
        r = self.class_replicas[cls] if capped else np.full(len(cls), np.inf)
        fit, stronger = replica_fit(d, r, self.vcpus[pool], self.mem[pool], self.gpus[pool])
        limit = self.class_per_node[cls]
        limited = limit < fit
        if not limited.any():
            return fit, stronger
        return np.minimum(fit, limit).astype(np.float32), stronger | limited

    def node_share(self, cand: IntArray, demand: FloatArray) -> FloatArray:
        """Per pool in `cand`: a replica of `demand` (cpu, memory, GPUs) costs this share of a
        fully used node's cost, by the resource it uses most of."""
        cpu, mem, gpu = demand.tolist()
        use = np.maximum(cpu / self.vcpus[cand], mem / self.mem[cand])
        if gpu > 0:
            use = np.maximum(use, gpu / np.maximum(self.gpus[cand], 1e-12))
        out: FloatArray = self.node_cost[cand] * use
        return out

    @property
    def large_kinds(self) -> int:
        """Large-replica rows per pool: one per resource and k."""
        return 3 * self.large_replica_rows

    def large_weights(self, cls: IntArray, pool: IntArray) -> FloatArray:
        """Per pair (cls[i], pool[i]): its weights in the pool's large-replica rows, resource r and
        k at column (k - 1) * 3 + r (classes.large_replica_weights)."""
        if self.large_replica_rows <= 0 or len(cls) == 0:
            return np.zeros((len(cls), self.large_kinds))
        cap = np.stack([self.vcpus[pool], self.mem[pool], self.gpus[pool]], axis=1)
        return large_replica_table(self.class_demand[cls], cap, self.large_replica_rows)

    def large_rows_needed(self, pools: IntArray) -> BoolArray:
        """Per pool and large-replica row: whether two or more classes weigh in it (for one class
        its fit row is as strong). A class weighs in row (r, k) when it needs at least 1/(k+1)
        of the node's resource r."""
        need = np.zeros((len(pools), self.large_kinds), dtype=bool)
        if not self.classes or len(pools) == 0:
            return need
        caps = (self.vcpus[pools], self.mem[pools], self.gpus[pools])
        for k in range(1, self.large_replica_rows + 1):
            for r in range(3):
                scaled = np.sort((k + 1) * self.class_demand[:, r][self.class_demand[:, r] > 0])
                cap = caps[r]
                heavy = len(scaled) - np.searchsorted(scaled, cap * (1 - 1e-9), side="left")
                need[:, (k - 1) * 3 + r] = (heavy >= 2) & (cap > 0)
        return need


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
    e_class: IntArray  # per egress column (and its row): class k
    e_peer: IntArray  # class v
    e_site: IntArray
    e_cost: FloatArray  # priced at the cheapest destination of v in another cloud (or anywhere: one tier)
    e_keys_k: IntArray  # k * n_sites + s per egress column
    e_keys_v: IntArray  # v * n_sites + s per egress column
    # two tiers: traffic of k at s may leave at the same cloud's (cheaper) price only when v runs at
    # another site of that cloud: near column a <= Y_{v,cloud} - x_v(s), Y = v's replicas there
    near_e: IntArray  # per near column: its egress row
    near_cost: FloatArray
    near_y: IntArray  # its Y column
    near_row0: int  # rows a - Y + x_v(s) <= 0, one per near column
    y_class: IntArray  # per Y column: class v
    y_prov: IntArray  # cloud
    y_row0: int  # rows Y - sum_{p of v in the cloud} x_vp = 0, one per Y column
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

    @property
    def n_near(self) -> int:
        return len(self.near_e)

    @property
    def n_y(self) -> int:
        return len(self.y_class)


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
    sites_of: dict[int, IntArray] = {}

    def sites(c: int) -> IntArray:
        """The sites of class c's candidate pools (once per class: a class can be in many dependencies)."""
        if c not in sites_of:
            sites_of[c] = np.unique(mi.site_idx[cls[c].cand])
        return sites_of[c]

    z_class: list[IntArray] = []
    z_site: list[IntArray] = []
    for i, c in enumerate(cls):
        if c.min_sites > 1:
            z_class.append(np.full(len(sites(i)), i, dtype=np.int64))
            z_site.append(sites(i))
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
    near: list[tuple[int, float, int]] = []  # (egress column, cost, Y column)
    y_of: dict[tuple[int, int], int] = {}
    prov = mi.site_provider if len(mi.site_provider) else np.zeros(ns, dtype=np.int64)
    two_tiers = len(mi.site_provider) > 0
    for k, c in enumerate(cls):
        for v, gib in c.deps:
            mine, theirs = sites(k), sites(v)
            per_gb = mi.cost_weight * gib * GIB_IN_GB
            # per site s of k: the cheapest way out to v's sites other than s, in another cloud
            # (far) and in the same cloud (close); never above what the dearest used destination costs
            price = mi.egress[np.ix_(mine, theirs)]
            away = mine[:, None] != theirs[None, :]
            same = prov[mine][:, None] == prov[theirs][None, :]
            far = np.where(away & ~same, price, math.inf).min(axis=1, initial=math.inf)
            close = np.where(away & same, price, math.inf).min(axis=1, initial=math.inf)
            tiered = (close < far) & (far < math.inf) & two_tiers
            cost = per_gb * np.where(tiered, far, np.minimum(far, close))
            for i in np.flatnonzero(away.any(axis=1) & (cost > 0)).tolist():
                s = int(mine[i])
                if tiered[i]:
                    key = (v, int(prov[s]))
                    y_of.setdefault(key, len(y_of))
                    near.append((len(ek), per_gb * float(close[i]), y_of[key]))
                ek.append(k)
                ev.append(v)
                es.append(s)
                ecost.append(float(cost[i]))
    e_row0 = len(lo)
    lo += [0.0] * len(ek)
    hi += [INF] * len(ek)
    near_row0 = len(lo)
    lo += [-INF] * len(near)
    hi += [0.0] * len(near)
    y_row0 = len(lo)
    lo += [0.0] * len(y_of)
    hi += [0.0] * len(y_of)
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
        near_e=np.array([n[0] for n in near], dtype=np.int64),
        near_cost=np.array([n[1] for n in near], dtype=np.float64),
        near_y=np.array([n[2] for n in near], dtype=np.int64),
        near_row0=near_row0,
        y_class=np.array([k[0] for k in y_of], dtype=np.int64),
        y_prov=np.array([k[1] for k in y_of], dtype=np.int64),
        y_row0=y_row0,
        n_fixed_rows=len(lo),
        row_lo=np.array(lo, dtype=np.float64),
        row_hi=np.array(hi, dtype=np.float64),
        e_row0=e_row0,
        keep_row0=keep_row0,
        moves_row=moves_row,
        keep_key=mi.keep_class * mi.n_pools + mi.keep_pool,
    )


@dataclass
class EgressValues:
    """The egress columns' values at an integer placement (what the model charges for it)."""

    far: FloatArray  # per egress column: the share of k's traffic at s leaving at the far price
    near: FloatArray  # per near column: the share leaving within the cloud
    y: FloatArray  # per Y column: v's replicas in the cloud

    def cost(self, lay: Layout) -> float:
        return float(lay.e_cost @ self.far + lay.near_cost @ self.near)


def egress_values(mi: ModelInput, lay: Layout, x: dict[tuple[int, int], int]) -> EgressValues:
    """Traffic of k at s that v's replicas there cannot absorb leaves s; it leaves at the same
    cloud's price when v runs at another site of that cloud (a near column), else at the far one."""
    frac: dict[tuple[int, int], float] = {}
    at: dict[tuple[int, int], int] = {}
    in_cloud: dict[tuple[int, int], int] = {}
    prov = mi.site_provider
    for (c, p), r in x.items():
        site = int(mi.site_idx[p])
        frac[(c, site)] = frac.get((c, site), 0.0) + r / mi.classes[c].replicas
        at[(c, site)] = at.get((c, site), 0) + r
        if len(prov):
            key = (c, int(prov[site]))
            in_cloud[key] = in_cloud.get(key, 0) + r
    leave = np.array(
        [
            max(0.0, frac.get((int(k), int(s)), 0.0) - frac.get((int(v), int(s)), 0.0))
            for k, v, s in zip(lay.e_class, lay.e_peer, lay.e_site, strict=True)
        ]
    )
    y = np.array([float(in_cloud.get((int(v), int(q)), 0)) for v, q in zip(lay.y_class, lay.y_prov, strict=True)])
    near = np.zeros(lay.n_near)
    for i in range(lay.n_near):
        e = int(lay.near_e[i])
        elsewhere = y[lay.near_y[i]] - at.get((int(lay.e_peer[e]), int(lay.e_site[e])), 0)
        near[i] = leave[e] if elsewhere >= 1 else 0.0
    far = leave.copy()
    np.subtract.at(far, lay.near_e, near)
    return EgressValues(far=far, near=near, y=y)
