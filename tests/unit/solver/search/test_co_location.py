"""The co-location start (search/co_location.py, incumbent.co_located_start): dependency
components moved together to the site where their compute and egress cost least, every rule
kept, offered only when feasible and cheaper."""

from __future__ import annotations

import dataclasses
import importlib
import random
from typing import Any

import numpy as np
import pytest

from broker.core.domain import Dependency, Workload
from broker.solver import PlacementProblem, SolverOptions, solve
from broker.solver.model.layout import ModelInput, make_layout
from broker.solver.search.co_location import co_located
from broker.solver.search.column_generation import start
from broker.solver.search.incumbent import co_located_start, first_incumbent
from broker.solver.search.placements import class_nodes, feasible, objective, routed_egress
from broker.solver.search.state import SearchResult
from broker.solver.types import ClassPlacement

from ..support.cases import optimum, search_input_of
from ..support.catalog import GDPR, SPOT_OK, US_ONLY, problem, table
from ..support.checks import assert_valid

AWS_DE, GCP_BE, AWS_US, AZURE_US, PRIVATE = 0, 1, 2, 3, 4  # support.catalog.SITES


def _classes_of(mi: ModelInput, n: int) -> list[int]:
    return [next(i for i, c in enumerate(mi.classes) if j in c.members) for j in range(n)]


def _on(mi: ModelInput, c: int, site: int) -> int:
    """The cheapest candidate pool of class c at `site`."""
    cand = mi.classes[c].cand
    at = cand[mi.site_idx[cand] == site]
    return int(at[np.argmin(mi.node_cost[at])])


def _pair_apart() -> tuple[ModelInput, ClassPlacement]:
    """An EU API calling a database heavily (egress 0.02 $/GB between any two sites, so 200 GiB/h
    cost 4.3 $/h apart), placed apart: each at its own cheapest site, the database in the US."""
    ws = [
        Workload("api", replicas=2, cpu=1, memory_gib=2, residency=GDPR, depends_on=(Dependency("db", 200.0),)),
        Workload("db", replicas=1, cpu=2, memory_gib=4),
        Workload("batch", replicas=3, cpu=0.5, memory_gib=1),
    ]
    mi, _ = search_input_of(problem(ws))
    api, db, batch = _classes_of(mi, 3)
    x = {(api, _on(mi, api, GCP_BE)): 2, (db, _on(mi, db, AWS_US)): 1, (batch, _on(mi, batch, AWS_US)): 3}
    assert feasible(mi, x, class_nodes(mi, x))
    return mi, x


def test_a_service_follows_its_caller_where_co_location_is_clearly_optimal() -> None:
    mi, x = _pair_apart()
    lay = make_layout(mi)
    y = co_located(mi, x)
    assert feasible(mi, y, class_nodes(mi, y))
    assert routed_egress(mi, x) > 4.0 and routed_egress(mi, y) == 0.0
    api, db, _ = _classes_of(mi, 3)
    api_sites = {int(mi.site_idx[p]) for c, p in y if c == api}
    db_sites = {int(mi.site_idx[p]) for c, p in y if c == db}
    assert api_sites == db_sites and api_sites <= {AWS_DE, GCP_BE, PRIVATE}
    # nothing but the pair's placement changes, and the pair costs what the optimum pays for it
    _lp, best = optimum(mi)
    assert objective(mi, lay, y) == pytest.approx(best, rel=1e-6)


def test_the_start_is_offered_only_when_cheaper() -> None:
    mi, x = _pair_apart()
    st = start(mi, [x], time_limit_s=10, seed=0, opts=SolverOptions(), prove=False)
    offered = co_located_start(st, [x])
    assert len(offered) == 1 and objective(mi, st.lay, offered[0]) < objective(mi, st.lay, x) - 4.0
    # from the co-located start itself nothing cheaper is found: nothing more is offered
    assert co_located_start(st, offered) == []
    assert co_located_start(st, []) == []  # no feasible start
    off = start(mi, [x], time_limit_s=10, seed=0, opts=SolverOptions(co_location_share=0.0), prove=False)
    assert co_located_start(off, [x]) == []
    # egress is most of what x costs: with a threshold above that share, no start either
    share = routed_egress(mi, x) / objective(mi, st.lay, x)
    assert 0.5 < share < 1.0
    for threshold, offers in ((share - 0.01, 1), (share + 0.01, 0)):
        gated = dataclasses.replace(st, opts=SolverOptions(co_location_min_egress_share=threshold))
        assert len(co_located_start(gated, [x])) == offers


def test_nothing_moves_without_traffic_or_where_moving_costs_more() -> None:
    ws = [
        Workload("api", replicas=2, cpu=1, memory_gib=2, residency=GDPR, depends_on=(Dependency("db", 0.01),)),
        Workload("db", replicas=1, cpu=16, memory_gib=64, residency=US_ONLY),
    ]
    mi, starts = search_input_of(problem(ws))
    x = starts[0]
    # residency keeps them apart: the egress stays, and nothing dearer is taken
    y = co_located(mi, x)
    lay = make_layout(mi)
    assert objective(mi, lay, y) <= objective(mi, lay, x) + 1e-9
    plain, plain_starts = search_input_of(problem([Workload("a", replicas=2, cpu=1, memory_gib=2)]))
    assert co_located(plain, plain_starts[0]) is plain_starts[0]


def _dependency_heavy(seed: int, n: int = 10) -> PlacementProblem:
    """Random workloads with spread, spot caps, residency and owned capacity, half of them
    callers of two or three services (chains and stars), heavy traffic."""
    rnd = random.Random(seed)
    shapes = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (1.0, 4.0), (2.0, 8.0), (4.0, 16.0)]
    ws: list[Workload] = []
    services = [0, 1, 2][: rnd.choice([2, 3])]
    for i in range(n):
        cpu, mem = rnd.choice(shapes)
        kw: dict[str, Any] = {}
        if rnd.random() < 0.35:
            kw["min_sites"] = 2
        if rnd.random() < 0.4:
            kw["capacity_types"] = SPOT_OK
            kw["max_spot_fraction"] = rnd.choice([0.0, 0.5])
        if rnd.random() < 0.4:
            kw["residency"] = rnd.choice([GDPR, US_ONLY])
        if i not in services and rnd.random() < 0.6:
            callee = rnd.choice(services + [j for j in range(3, i) if ws[j].depends_on == ()][:1])
            kw["depends_on"] = (Dependency(f"w{callee}", round(rnd.uniform(5.0, 300.0), 1)),)
        ws.append(Workload(f"w{i}", replicas=rnd.choice([1, 2, 3, 4]), cpu=cpu, memory_gib=mem, **kw))
        if ws[-1].min_sites > ws[-1].replicas:
            ws[-1] = dataclasses.replace(ws[-1], replicas=ws[-1].min_sites)
    return problem(ws, tbl=table(owned_nodes=rnd.choice([1, 2, 3]), owned_price=0.2))


def _co_located_answer(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """solve() answering with the co-located start of its cheapest feasible start (so the
    checker reads it as an answer: dealt back, packed, priced); records (start, co-located)."""
    seen: list[tuple[float, float]] = []

    def search(mi: ModelInput, *, starts: list[ClassPlacement], **_: Any) -> SearchResult:
        lay = make_layout(mi)
        x = min((s for s in starts if feasible(mi, s, class_nodes(mi, s))), key=lambda s: objective(mi, lay, s))
        y = co_located(mi, x)
        assert feasible(mi, y, class_nodes(mi, y))
        seen.append((objective(mi, lay, x), objective(mi, lay, y)))
        return SearchResult("feasible", y, seen[-1][1], 0.0, False, 0, 0)

    # the module (the package exports the function under the same name)
    monkeypatch.setattr(importlib.import_module("broker.solver.solve"), "search", search)
    return seen


@pytest.mark.parametrize("seed", range(12))
def test_the_start_keeps_every_rule(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    seen = _co_located_answer(monkeypatch)
    p = _dependency_heavy(seed)
    res = solve(p, time_limit_s=5, options=SolverOptions(price_baselines=False))
    assert_valid(p, res)
    (before, after) = seen[0]
    assert after <= before + 1e-9


def test_the_start_lowers_egress_on_random_dependency_heavy_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _co_located_answer(monkeypatch)
    for seed in range(12):
        solve(_dependency_heavy(seed), time_limit_s=5, options=SolverOptions(price_baselines=False))
    # the baselines place services and callers independently: on most of these requests the
    # start finds a cheaper co-location (the test fails should the start stop moving anything)
    assert sum(after < before - 1e-6 for before, after in seen) >= len(seen) // 2


def test_owned_capacity_is_kept_where_co_location_would_overfill_it() -> None:
    """One cheap owned node (48 vCPUs) runs the API; its database would join it, but both do not
    fit: the start must not take the owned node twice."""
    ws = [
        Workload("api", replicas=2, cpu=12, memory_gib=24, residency=GDPR, depends_on=(Dependency("db", 300.0),)),
        Workload("db", replicas=2, cpu=14, memory_gib=28, residency=GDPR),
    ]
    mi, _ = search_input_of(problem(ws, tbl=table(owned_nodes=1, owned_price=0.05)))
    api, db = _classes_of(mi, 2)
    owned = _on(mi, api, PRIVATE)
    assert mi.max_nodes[owned] == 1
    x = {(api, owned): 2, (db, _on(mi, db, GCP_BE)): 2}
    assert feasible(mi, x, class_nodes(mi, x))
    y = co_located(mi, x)
    assert feasible(mi, y, class_nodes(mi, y))
    assert routed_egress(mi, y) < routed_egress(mi, x)  # it co-locates elsewhere instead


def test_the_rounded_lp_taken_as_incumbent_is_co_located_too() -> None:
    mi, x = _pair_apart()
    batch = _classes_of(mi, 3)[2]
    dearer = dict(x) | {(batch, _on(mi, batch, AWS_DE)): 3}
    del dearer[(batch, _on(mi, batch, AWS_US))]
    st = start(mi, [dearer], time_limit_s=10, seed=0, opts=SolverOptions(), prove=False)
    st.lp_x = x  # the LP rounded: cheaper than the start, its pair apart
    first_incumbent(st, [dearer])
    assert st.incumbent is not None and routed_egress(mi, st.incumbent) == 0.0
    assert st.ub == pytest.approx(objective(mi, st.lay, st.incumbent)) and st.ub < objective(mi, st.lay, x) - 4.0
    st.lp_x = x
    off = dataclasses.replace(st, opts=SolverOptions(co_location_share=0.0))
    first_incumbent(off, [dearer])
    assert off.incumbent == x


def test_its_node_count_is_the_search_s_own() -> None:
    """_Placed counts a pool's nodes incrementally as class_nodes counts them, large-replica rows
    included: three replicas above half a 2-vCPU node of different classes need three nodes."""
    from broker.solver.search.co_location import _Placed

    p = problem([Workload("a", 1, 1.2, 1.0), Workload("b", 1, 1.1, 1.0), Workload("c", 1, 1.3, 1.0)])
    mi, _starts = search_input_of(p)
    pool = next(q for q in mi.classes[0].cand.tolist() if mi.vcpus[q] == 2 and all(q in c.cand for c in mi.classes))
    x: ClassPlacement = {(c, pool): 1 for c in range(len(mi.classes))}
    placed = _Placed.of(mi, x)
    assert placed.nodes(pool) == class_nodes(mi, x)[pool] == 3
    placed.put(1, {})  # a class moved away
    assert placed.nodes(pool) == class_nodes(mi, {k: r for k, r in x.items() if k[0] != 1})[pool] == 2
