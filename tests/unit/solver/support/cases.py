"""Search inputs on the synthetic catalog, with the full model's LP and optimum to test against.

Every `instance` has spread, spot caps, a depends_on pair (egress columns) and a current
placement (keep rows). `case(seed)` is the ModelInput and start placements solve() hands the
search, and the LP and MIP optimum of the full model (every universe column in one HiGHS model,
solved to optimality); it is cached, since the optimum takes a while.
"""

from __future__ import annotations

import dataclasses
import functools
import random

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from broker.core.domain import Dependency, Workload
from broker.solver import PlacementProblem, SolverOptions
from broker.solver.model.layout import ModelInput, make_layout
from broker.solver.model.master import Master
from broker.solver.model.universe import make_universe
from broker.solver.prepare.candidates import prepare
from broker.solver.prepare.classes import SPOT
from broker.solver.solve import search_input
from broker.solver.types import ClassPlacement

from .catalog import GDPR, SPOT_OK, US_ONLY, problem

CASES = (0, 2, 6)  # seeds of `instance` most tests run on
# cpu-heavy and memory-heavy classes (one split for all pools cannot suit both), spot caps that
# bind (spot is 0.35x) and spread whose second site is dearer; no class has both (floors are exact)
CPU_MEM_SPOT_SPREAD = [
    Workload("cpu-spot", replicas=8, cpu=2, memory_gib=1, capacity_types=SPOT_OK, max_spot_fraction=0.5),
    Workload("mem-spot", replicas=4, cpu=0.5, memory_gib=8, capacity_types=SPOT_OK, max_spot_fraction=0.25),
    Workload("cpu-spread", replicas=4, cpu=2, memory_gib=1, min_sites=2),
    Workload("mem-spread", replicas=4, cpu=0.5, memory_gib=7, min_sites=2),
]
WORKLOAD_SHAPES = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (1.0, 4.0), (2.0, 8.0), (3.0, 6.0), (4.0, 16.0)]


def instance(seed: int, n: int = 14, *, spread: bool = True) -> PlacementProblem:
    """`n` random workloads (spread, spot caps, residency), a dependency pair, and w1 running now."""
    rnd = random.Random(seed)
    ws: list[Workload] = []
    for i in range(n):
        cpu, mem = rnd.choice(WORKLOAD_SHAPES)
        kw: dict[str, object] = {}
        if spread and rnd.random() < 0.35:
            kw["min_sites"] = 2
        if rnd.random() < 0.35:
            kw["capacity_types"] = SPOT_OK
            kw["max_spot_fraction"] = 0.5
        if rnd.random() < 0.3:
            kw["residency"] = rnd.choice([GDPR, US_ONLY])
        ws.append(Workload(f"w{i}", replicas=rnd.choice([1, 2, 3, 4, 6]), cpu=cpu, memory_gib=mem, **kw))  # type: ignore[arg-type]
    # a pair that talks (egress columns); w1 runs somewhere now (keep rows, moves)
    ws[0] = Workload("w0", replicas=3, cpu=1, memory_gib=2, depends_on=(Dependency("w1", 40.0),))
    ws[1] = Workload("w1", replicas=2, cpu=1, memory_gib=2, min_sites=2 if spread else 1)
    p = problem(ws)
    now = p.table.pools[2].id  # a small on-demand pool
    req = dataclasses.replace(p.request, current=(("w1", now, 2),), migration_cost_per_replica=2.0)
    return dataclasses.replace(p, request=req)


def search_input_of(p: PlacementProblem) -> tuple[ModelInput, list[ClassPlacement]]:
    """The ModelInput and start placements solve() hands to the search."""
    si = search_input(p, prepare(p), SolverOptions())
    return si.mi, si.starts


@functools.cache
def case(seed: int, spread: bool = True) -> tuple[ModelInput, list[ClassPlacement], float, float]:
    """The search input of `instance(seed)`, the full LP and the optimum."""
    mi, starts = search_input_of(instance(seed, spread=spread))
    return (mi, starts, *optimum(mi))


def optimum(mi: ModelInput) -> tuple[float, float]:
    """(LP, MIP optimum) of the full model: every candidate column of the catalog."""
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    m = Master(mi, lay, uni)
    m.add_columns(np.arange(uni.size))
    lp = m.solve_lp()
    assert lp is not None
    res = m.solve_mip(time_limit_s=30, seed=0, hint=None, rel_gap=1e-9)
    assert res.status == "optimal"
    return lp.value, res.value


def kept_rows_lp(mi: ModelInput) -> float:
    """min sum_p cost_p n_p + sum_cp rep_cp x_cp over the demand, cpu and memory capacity, spot
    and spread rows (z_cs <= x_c(s), z_cs <= K_c, sum_s z_cs >= m_c K_c) of every candidate:
    the LP whose dual the node-share bound is."""
    cls = np.concatenate([np.full(len(c.cand), i) for i, c in enumerate(mi.classes)])
    pool = np.concatenate([c.cand for c in mi.classes])
    nx, npl = len(pool), mi.n_pools
    spread = [i for i, c in enumerate(mi.classes) if c.min_sites > 1]
    z_key = np.unique(np.concatenate([[i * mi.n_sites + s for s in mi.site_idx[mi.classes[i].cand]] for i in spread]))
    nz = len(z_key)
    x_col, n_col, z_col = np.arange(nx), nx + np.arange(npl), nx + npl + np.arange(nz)
    demand = np.stack([mi.classes[c].demand for c in cls])
    rows: list[sp.coo_matrix] = []
    hi: list[np.ndarray] = []

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray, n_rows: int, bound: np.ndarray) -> None:
        rows.append(sp.coo_matrix((v, (r, c)), shape=(n_rows, nx + npl + nz)))
        hi.append(bound)

    for res, cap in ((0, mi.vcpus), (1, mi.mem)):  # sum_c d_cr x_cp - cap_pr n_p <= 0
        add(np.r_[pool, np.arange(npl)], np.r_[x_col, n_col], np.r_[demand[:, res], -cap], npl, np.zeros(npl))
    capped = [i for i, c in enumerate(mi.classes) if c.spot_cap is not None]
    on_spot = np.isin(cls, capped) & (mi.cap_idx[pool] == SPOT)
    spot_row = np.searchsorted(capped, cls[on_spot])
    add(
        spot_row,
        x_col[on_spot],
        np.ones(on_spot.sum()),
        len(capped),
        np.array([mi.classes[i].spot_cap for i in capped]),
    )
    x_z = np.searchsorted(z_key, cls * mi.n_sites + mi.site_idx[pool])
    in_z = np.isin(cls, spread)
    add(
        np.r_[np.arange(nz), x_z[in_z]],
        np.r_[z_col, x_col[in_z]],
        np.r_[np.ones(nz), -np.ones(in_z.sum())],
        nz,
        np.zeros(nz),
    )
    z_class = z_key // mi.n_sites
    need = np.array([mi.classes[i].min_sites * mi.classes[i].size for i in spread], dtype=float)
    add(np.searchsorted(spread, z_class), z_col, -np.ones(nz), len(spread), -need)
    cost = np.r_[np.concatenate([c.rep_cost for c in mi.classes]), mi.node_cost, np.zeros(nz)]
    a_eq = sp.coo_matrix((np.ones(nx), (cls, x_col)), shape=(len(mi.classes), nx + npl + nz))
    r_eq = np.array([c.replicas for c in mi.classes], dtype=float)
    z_hi = np.array([mi.classes[i].size for i in z_class], dtype=float)
    bounds = np.c_[np.zeros(nx + npl + nz), np.r_[np.full(nx + npl, np.inf), z_hi]]
    res = linprog(cost, A_ub=sp.vstack(rows), b_ub=np.concatenate(hi), A_eq=a_eq, b_eq=r_eq, bounds=bounds)
    assert res.status == 0, res.message
    return float(res.fun)
