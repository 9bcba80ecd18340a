"""The catalog-wide Lagrangian bound against proven optima on small synthetic catalogs.

Every instance has spread, spot caps, a depends_on pair (egress columns) and a current
placement (keep rows). The optimum comes from the full model (every universe column in
one HiGHS MIP, solved to optimality); the rounds come from the real column generation
in search.py, with the bound computed from each round's duals.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import random
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

import broker.solver.search as search_mod
import broker.solver.share_bound as share_bound_mod
from broker.core.domain import CapacityType, Dependency, ResidencyPolicy, Workload
from broker.solver import PlacementProblem
from broker.solver import pricing as pricing_mod
from broker.solver.bound import lagrangian_bound, lagrangian_bound_detail
from broker.solver.classes import SPOT
from broker.solver.master import Master
from broker.solver.model import ModelInput, make_layout
from broker.solver.pricing import ColumnCosts, column_reduced_costs
from broker.solver.search import ClassPlacement
from broker.solver.share_bound import EgressColumns, simple_bound
from broker.solver.universe import Universe, make_universe

from .synthetic import GDPR, US_ONLY, problem

solve_mod = importlib.import_module("broker.solver.solve")
SPOT_OK = (CapacityType.ONDEMAND, CapacityType.SPOT)
# cpu-heavy and memory-heavy classes (one split for all pools cannot suit both), spot caps that
# bind (spot is 0.35x) and spread whose second site is dearer; no class has both (floors are exact)
CPU_MEM_SPOT_SPREAD = [
    Workload("cpu-spot", replicas=8, cpu=2, memory_gib=1, capacity_types=SPOT_OK, max_spot_fraction=0.5),
    Workload("mem-spot", replicas=4, cpu=0.5, memory_gib=8, capacity_types=SPOT_OK, max_spot_fraction=0.25),
    Workload("cpu-spread", replicas=4, cpu=2, memory_gib=1, min_sites=2),
    Workload("mem-spread", replicas=4, cpu=0.5, memory_gib=7, min_sites=2),
]
SHAPES = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (1.0, 4.0), (2.0, 8.0), (3.0, 6.0), (4.0, 16.0)]


def _instance(seed: int, n: int = 14, *, spread: bool = True) -> PlacementProblem:
    rnd = random.Random(seed)
    ws: list[Workload] = []
    for i in range(n):
        cpu, mem = rnd.choice(SHAPES)
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


@functools.cache
def _case(seed: int, spread: bool = True) -> tuple[ModelInput, list[ClassPlacement], float, float]:
    """The ModelInput and start placements solve() hands to search(), the full LP and the optimum."""
    mi, starts = _search_input(_instance(seed, spread=spread))
    return (mi, starts, *_optimum(mi))


def _search_input(p: PlacementProblem) -> tuple[ModelInput, list[ClassPlacement]]:
    seen: dict[str, object] = {}
    real = solve_mod.search

    def spy(mi: ModelInput, **kw: object) -> object:
        seen["mi"], seen["starts"] = mi, kw["starts"]
        return real(mi, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(solve_mod, "search", spy)
        solve_mod.solve(p, time_limit_s=10)
    return seen["mi"], seen["starts"]  # type: ignore[return-value]


def _optimum(mi: ModelInput) -> tuple[float, float]:
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


@dataclasses.dataclass
class _Round:
    z_lp: float
    bound: float
    others: list[float]  # bounds from perturbed multipliers (when asked for)


def _rounds(
    mi: ModelInput,
    starts: list[ClassPlacement],
    monkeypatch: pytest.MonkeyPatch,
    perturb: int = 0,
    loose: bool = False,
    **kw: int,
) -> tuple[list[_Round], search_mod.SearchResult | None]:
    """Run the real column generation; the bound from every round's duals (and from
    `perturb` random distortions of them: scaled, shifted, of either sign). loose: in two
    phases, fit rows capped only once the first phase converged (as on big requests)."""
    out: list[_Round] = []
    real = column_reduced_costs
    rng = np.random.default_rng(0)

    def spy(mi_: ModelInput, uni: Universe, m: Master, row_dual: np.ndarray) -> ColumnCosts:
        z = float(m.h.getInfo().objective_function_value)
        others = []
        col_dual = np.asarray(m.h.getSolution().col_dual)
        for _ in range(perturb):
            y = row_dual * rng.uniform(0.0, 2.0, len(row_dual)) + rng.normal(0.0, 0.05, len(row_dual))
            cd = col_dual + rng.normal(0.0, 0.05, len(col_dual))
            others.append(lagrangian_bound_detail(mi_, uni, m, y, cd).value)
        out.append(_Round(z, lagrangian_bound(mi_, uni, m, row_dual), others))
        return real(mi_, uni, m, row_dual)

    with monkeypatch.context() as mp:
        mp.setattr(pricing_mod, "column_reduced_costs", spy)
        mp.setattr(search_mod, "LOOSE_FIT_MIN_COLS", -1 if loose else 10**12)
        res = search_mod.search(mi, starts=starts, time_limit_s=20, seed=0, **kw)
    return out, res


def _cases() -> Iterator[int]:
    yield from (0, 2, 6)


@pytest.mark.parametrize("loose", [False, True])
@pytest.mark.parametrize("seed", list(_cases()))
def test_bound_is_valid_in_every_round_of_unfinished_column_generation(
    seed: int, loose: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    mi, starts, _, opt = _case(seed)
    assert mi.classes and len(mi.keep_class) and any(c.min_sites > 1 for c in mi.classes)
    full, _ = _rounds(mi, starts, monkeypatch, loose=loose)
    assert len(full) >= 2  # round 1 found columns to add: unfinished
    for max_rounds in (1, 2, 3):
        rounds, res = _rounds(mi, starts, monkeypatch, loose=loose, max_rounds=max_rounds)
        assert res is not None and len(rounds) == min(max_rounds, len(full))
        for r in rounds:
            assert r.bound <= opt + 1e-7 * max(1.0, abs(opt)), (max_rounds, r.bound, opt)
    first = _rounds(mi, starts, monkeypatch, max_rounds=1)[0][0]
    assert math.isfinite(first.bound) and first.bound > 0


@pytest.mark.parametrize("loose", [False, True])
@pytest.mark.parametrize("seed", list(_cases()))
def test_bound_reaches_the_lp_when_column_generation_converges(
    seed: int, loose: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    mi, starts, full_lp, opt = _case(seed)
    rounds, res = _rounds(mi, starts, monkeypatch, loose=loose)
    assert res is not None and res.proven
    last = rounds[-1]
    assert last.z_lp == pytest.approx(full_lp, rel=1e-6)
    assert last.bound <= opt + 1e-7
    # the restricted master counts a pool in a spread class's node row only once that class's
    # column on it is in: the LP's duals can then over-credit such pools (see bound.py)
    assert last.bound >= last.z_lp * (1 - 0.01)


@pytest.mark.parametrize("seed", [1, 3])
def test_bound_equals_the_lp_at_convergence_without_spread(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    mi, starts, full_lp, opt = _case(seed, spread=False)
    rounds, res = _rounds(mi, starts, monkeypatch)
    assert res is not None and res.proven
    assert rounds[-1].bound == pytest.approx(full_lp, rel=1e-7)
    assert rounds[-1].bound <= opt + 1e-7


def test_any_multipliers_give_a_valid_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity does not rest on the duals being optimal, or even of the right sign."""
    mi, starts, _, opt = _case(2)
    rounds, _ = _rounds(mi, starts, monkeypatch, perturb=15)
    others = [v for r in rounds for v in r.others]
    assert len(others) >= 30 and any(math.isfinite(v) for v in others)
    assert max(others) <= opt + 1e-7, (max(others), opt)


def test_bound_beats_the_fallbacks_once_the_lp_has_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    mi, starts, _, _ = _case(0)
    rounds, _ = _rounds(mi, starts, monkeypatch, max_rounds=3)
    assert rounds[-1].bound > simple_bound(mi)


@pytest.mark.parametrize("seed", list(_cases()))
def test_share_bound_never_exceeds_the_full_lp(seed: int) -> None:
    """simple_bound keeps only demand and capacity rows (and the spot caps): a relaxation of the LP."""
    mi, _, full_lp, _ = _case(seed)
    fallback = simple_bound(mi)
    assert 0 < fallback <= full_lp + 1e-7, (fallback, full_lp)


@pytest.mark.parametrize("seed", [*_cases(), 5, 8, 13, 14])
def test_a_split_per_pool_beats_one_split_for_all_and_stays_below_the_full_lp(seed: int) -> None:
    mi, _, full_lp, _ = _case(seed)
    one_split = simple_bound(mi, rounds=0)
    per_pool = simple_bound(mi)
    assert one_split < per_pool <= full_lp + 1e-7, (one_split, per_pool, full_lp)


def test_share_bound_reaches_the_lp_of_what_it_keeps_with_spot_caps_and_spread() -> None:
    """Cpu-heavy and memory-heavy classes (one split for all pools cannot suit both), spot caps
    that bind (spot is 0.35x) and spread whose second site is dearer: the bound is the dual of
    the LP with only the demand, capacity, spot and spread rows, so it must come close to that
    LP's optimum, and never exceed it."""
    mi, _ = _search_input(problem(CPU_MEM_SPOT_SPREAD))
    assert not any(c.spot_cap is not None and c.min_sites > 1 for c in mi.classes)  # floors are exact
    kept = _kept_rows_lp(mi)
    bound = simple_bound(mi)
    assert simple_bound(mi, rounds=0) < 0.98 * kept  # the per-pool split matters here
    # without the floors in the subgradient 0.688 of 0.711; a spot cap or spread one replica too strict: 0.77.
    # Subgradient steps stopped 2.1e-4 below the LP; the smoothed ascent with a temperature that
    # stays at 0.001 8.1e-4 below, and lowered further 8e-7
    assert kept * (1 - 1e-5) <= bound <= kept + 1e-7, (bound, kept)


@pytest.mark.parametrize("seed", [0, 2])
def test_share_bound_column_prices_never_exceed_the_exact_ones(seed: int) -> None:
    """The kept columns' prices are held in float32, rounded down: at any split each is at most
    the exact float64 price of its (class, pool), so every floor stays a valid bound."""
    mi, _ = _search_input(_instance(seed))
    cols = share_bound_mod._columns(mi)
    seg = np.searchsorted(cols.seg_bound, np.arange(len(cols.pool)), side="right") - 1
    cls = cols.seg_class[seg]
    gpu_share = share_bound_mod._gpu_share(mi)
    split = mi.node_cost * (1 - gpu_share)
    gpu_price = np.where(mi.gpus > 0, mi.node_cost * gpu_share / np.maximum(mi.gpus, 1e-12), 0.0)
    rng = np.random.default_rng(seed)
    for lam in (np.zeros(mi.n_pools), np.ones(mi.n_pools), rng.random(mi.n_pools)):
        each, _ = share_bound_mod._prices(cols, lam, 0, len(cols.pool))
        for j in range(len(cols.pool)):
            c, p = mi.classes[cls[j]], int(cols.pool[j])
            rep = float(c.rep_cost[np.flatnonzero(c.cand == p)[0]])
            share = lam[p] * c.demand[0] / mi.vcpus[p] + (1 - lam[p]) * c.demand[1] / mi.mem[p]
            exact = rep + c.demand[2] * gpu_price[p] + split[p] * share
            assert each[j] <= exact + 1e-12 * abs(exact), (j, each[j], exact)
            assert each[j] >= exact - 1e-6 * abs(exact) - 1e-12, (j, each[j], exact)


def _kept_rows_lp(mi: ModelInput) -> float:
    """min sum_p cost_p n_p + sum_cp rep_cp x_cp over the demand, cpu and memory capacity, spot
    and spread rows (z_cs <= x_c(s), z_cs <= K_c, sum_s z_cs >= m_c K_c) of every candidate."""
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


@pytest.mark.parametrize("seed", [0, 2])
def test_gpu_nodes_charge_their_gpus_in_the_share_bound(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU node's cost split by cpu and memory alone charged a GPU replica a sliver of its node;
    the GPUs' share lifts the bound, which stays below the full LP."""
    p = _instance(seed)
    gpu = [Workload(f"g{i}", replicas=2 + i, cpu=2, memory_gib=8, gpus=1) for i in range(2)]
    p = dataclasses.replace(p, request=dataclasses.replace(p.request, workloads=p.request.workloads + tuple(gpu)))
    mi, _starts = _search_input(p)
    assert (mi.class_demand[:, 2] > 0).any()
    full_lp, _opt = _optimum(mi)
    with_gpus = simple_bound(mi)
    monkeypatch.setattr(share_bound_mod, "_gpu_share", lambda mi_: np.zeros(mi_.n_pools))
    cpu_mem_only = simple_bound(mi)
    assert cpu_mem_only < with_gpus <= full_lp + 1e-7, (cpu_mem_only, with_gpus, full_lp)


def _egress(mi: ModelInput) -> EgressColumns:
    lay = make_layout(mi)
    return EgressColumns.of(lay)


@pytest.mark.parametrize("spread", [True, False])
@pytest.mark.parametrize("seed", list(_cases()))
def test_dependency_pairs_never_lower_the_share_bound_nor_lift_it_past_the_full_lp(seed: int, spread: bool) -> None:
    mi, _, full_lp, _ = _case(seed, spread=spread)
    plain = simple_bound(mi)
    with_egress = simple_bound(mi, egress=_egress(mi))
    assert plain - 1e-9 <= with_egress <= full_lp + 1e-7, (plain, with_egress, full_lp)


@pytest.mark.parametrize("seed", range(6))
def test_many_dependency_pairs_across_residencies_stay_below_the_full_lp(seed: int) -> None:
    """Chains and stars of dependencies (a class in several pairs), spread, spot caps and
    residencies that keep some pairs apart: the matched pair floors stay a relaxation."""
    rnd = random.Random(seed)
    ws: list[Workload] = []
    for i in range(10):
        cpu, mem = rnd.choice(SHAPES)
        replicas = rnd.choice([1, 2, 3, 4])
        kw: dict[str, object] = {"residency": rnd.choice([GDPR, US_ONLY, None])}
        if replicas > 1 and rnd.random() < 0.3:
            kw["min_sites"] = 2
        if rnd.random() < 0.3:
            kw["capacity_types"] = SPOT_OK
            kw["max_spot_fraction"] = 0.5
        if i and rnd.random() < 0.8:
            kw["depends_on"] = (Dependency(f"w{rnd.randrange(i)}", rnd.choice([5.0, 20.0, 60.0])),)
        ws.append(Workload(f"w{i}", replicas=replicas, cpu=cpu, memory_gib=mem, **kw))  # type: ignore[arg-type]
    mi, _ = _search_input(problem(ws))
    full_lp, _ = _optimum(mi)
    plain = simple_bound(mi)
    with_egress = simple_bound(mi, egress=_egress(mi))
    assert plain < with_egress <= full_lp + 1e-7, (plain, with_egress, full_lp)


@pytest.mark.parametrize("spot_cap", [False, True])
def test_a_pair_that_cannot_share_a_site_pays_its_egress_in_the_share_bound(spot_cap: bool) -> None:
    """An EU-only service that calls a US-only one: its traffic always leaves its site, at 0.02
    $/GB at least (synthetic.problem), so the bound rises by about that much, and no further than
    the full LP; also when both may run half their replicas on spot (the pairs' LP keeps their
    caps)."""
    kw: dict[str, object] = {"capacity_types": SPOT_OK, "max_spot_fraction": 0.5} if spot_cap else {}
    ws = [
        Workload(
            "eu-api", replicas=4, cpu=1, memory_gib=2, residency=GDPR, depends_on=(Dependency("us-db", 40.0),), **kw
        ),  # type: ignore[arg-type]
        Workload("us-db", replicas=2, cpu=2, memory_gib=4, residency=US_ONLY, **kw),  # type: ignore[arg-type]
        Workload("batch", replicas=4, cpu=0.5, memory_gib=1),
    ]
    mi, _ = _search_input(problem(ws))
    full_lp, optimum = _optimum(mi)
    plain = simple_bound(mi)
    with_egress = simple_bound(mi, egress=_egress(mi))
    least_egress = 40.0 * 1.073741824 * 0.02  # GiB/h in GB/h at the cheapest leaving rate
    assert with_egress >= plain + 0.99 * least_egress, (plain, with_egress)
    assert with_egress <= full_lp + 1e-7 <= optimum + 2e-7


def test_an_unfinished_search_takes_the_share_bound_computed_beside_its_mips() -> None:
    """One CG round, no Lagrangian bound: the share bound, computed in a thread while the MIPs
    run, is the search's bound, valid below the optimum."""
    mi, starts, _lp, optimum = _case(0)
    res = search_mod.search(mi, starts=starts, time_limit_s=3, seed=0, max_rounds=1)
    assert res is not None and not res.proven
    # at least the best single split's value (its ascent ran for as long as the MIPs had)
    assert res.lower_bound >= min(share_bound_mod.simple_bound(mi, rounds=0), res.objective) - 1e-6
    assert res.lower_bound <= optimum + 1e-6 <= res.objective + 2e-6


def test_a_pair_whose_peer_may_run_in_the_same_cloud_pays_the_cloud_s_own_rate_in_the_share_bound() -> None:
    """A DE-only service calling a US-only one: from AWS Frankfurt its traffic may leave at AWS'
    inter-region rate (0.02 $/GB) when the peer runs in AWS us-east-1, and only at the internet
    rate (0.09) to Azure. The bound charges the cheaper rate: the dearer one lifts it past the
    full LP."""
    de_only = ResidencyPolicy("de-only", allowed_countries=frozenset({"DE"}))
    ws = [
        Workload(
            "de-api", replicas=2, cpu=1, memory_gib=2, residency=de_only, depends_on=(Dependency("us-db", 200.0),)
        ),
        Workload("us-db", replicas=2, cpu=2, memory_gib=4, residency=US_ONLY),
    ]
    p = problem(ws)
    provider = np.array([s.provider for s in p.table.sites])
    rate = np.where(provider[:, None] == provider[None, :], 0.02, 0.09)
    np.fill_diagonal(rate, 0.0)
    mi, _ = _search_input(dataclasses.replace(p, egress_usd_per_gb=rate))
    lay = make_layout(mi)
    assert lay.n_near  # two tiers: within AWS and out of it
    full_lp, _ = _optimum(mi)
    plain = simple_bound(mi)
    with_egress = simple_bound(mi, egress=_egress(mi))
    assert plain + 0.99 * 200.0 * 1.073741824 * 0.02 <= with_egress <= full_lp + 1e-7, (plain, with_egress, full_lp)
    far_only = simple_bound(mi, egress=EgressColumns(lay.e_class, lay.e_peer, lay.e_site, lay.e_cost))
    assert far_only > full_lp + 1.0


def test_every_pair_of_a_star_pays_its_egress_in_the_share_bound() -> None:
    """Two EU-only services calling one US-only database: both their traffic leaves their sites,
    so the bound rises by both leaving rates (a matching of pairs counted one), and stays below
    the full LP."""
    ws = [
        Workload(
            f"eu-api-{i}", replicas=2, cpu=1, memory_gib=2, residency=GDPR, depends_on=(Dependency("us-db", 40.0),)
        )
        for i in range(2)
    ] + [Workload("us-db", replicas=2, cpu=2, memory_gib=4, residency=US_ONLY)]
    mi, _ = _search_input(problem(ws))
    full_lp, _ = _optimum(mi)
    plain = simple_bound(mi)
    with_egress = simple_bound(mi, egress=_egress(mi))
    least_egress = 40.0 * 1.073741824 * 0.02
    assert plain + 2 * 0.99 * least_egress <= with_egress <= full_lp + 1e-7, (plain, with_egress, full_lp)
