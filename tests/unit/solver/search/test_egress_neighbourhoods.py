"""Neighbourhoods over dependency components (search/egress_neighbourhoods.py) and the LNS that
uses them: whole components freed by the egress they pay, offered every cloud and their
peers' sites, so a service moves with its callers."""

from __future__ import annotations

import dataclasses

import numpy as np

from broker.core.domain import Dependency, Workload
from broker.solver import SolverOptions
from broker.solver.model.layout import ModelInput
from broker.solver.search.column_generation import column_generation, start
from broker.solver.search.egress_neighbourhoods import (
    co_location_columns,
    dependencies,
    egress_per_component,
    pick_components,
)
from broker.solver.search.incumbent import first_incumbent
from broker.solver.search.neighbourhoods import large_neighbourhoods
from broker.solver.search.placements import class_nodes, feasible, objective, routed_egress
from broker.solver.types import ClassPlacement

from ..support.cases import search_input_of
from ..support.catalog import GDPR, US_ONLY, problem

AWS_DE, GCP_BE, AWS_US, AZURE_US = 0, 1, 2, 3  # support.catalog.SITES


def _two_pairs() -> tuple[ModelInput, list[int]]:
    """Two EU APIs calling two US databases heavily, one batch job without traffic; egress 0.02
    $/GB within a cloud and 0.09 across. Classes in request order (dependent workloads stay alone)."""
    ws = [
        Workload("api-a", replicas=2, cpu=1, memory_gib=2, residency=GDPR, depends_on=(Dependency("db-a", 200.0),)),
        Workload("db-a", replicas=1, cpu=2, memory_gib=4, residency=US_ONLY),
        Workload("api-b", replicas=1, cpu=1, memory_gib=2, residency=GDPR, depends_on=(Dependency("db-b", 5.0),)),
        Workload("db-b", replicas=1, cpu=2, memory_gib=4, residency=US_ONLY),
        Workload("batch", replicas=3, cpu=0.5, memory_gib=1),
    ]
    p = problem(ws)
    provider = np.array([s.provider for s in p.table.sites])
    rate = np.where(provider[:, None] == provider[None, :], 0.02, 0.09)
    np.fill_diagonal(rate, 0.0)
    mi, _ = search_input_of(dataclasses.replace(p, egress_usd_per_gb=rate))
    of = [next(i for i, c in enumerate(mi.classes) if j in c.members) for j in range(len(ws))]
    return mi, of


def _on(mi: ModelInput, c: int, site: int) -> int:
    """The cheapest candidate pool of class c at `site`."""
    cand = mi.classes[c].cand
    at = cand[mi.site_idx[cand] == site]
    return int(at[np.argmin(mi.node_cost[at])])


def _apart(mi: ModelInput, of: list[int]) -> ClassPlacement:
    """Both APIs in GCP Belgium, both databases in Azure: all traffic at the internet's rate."""
    x = {(of[0], _on(mi, of[0], GCP_BE)): 2, (of[1], _on(mi, of[1], AZURE_US)): 1}
    x |= {(of[2], _on(mi, of[2], GCP_BE)): 1, (of[3], _on(mi, of[3], AZURE_US)): 1}
    return x | {(of[4], _on(mi, of[4], GCP_BE)): 3}


def test_components_are_the_pairs_and_a_class_without_traffic_stands_alone() -> None:
    mi, of = _two_pairs()
    deps = dependencies(mi)
    comp = deps.component
    assert comp[of[0]] == comp[of[1]] != comp[of[2]] == comp[of[3]]
    assert comp[of[4]] not in {comp[of[0]], comp[of[2]]}
    assert deps.peers[of[1]] == [of[0]] and deps.peers[of[4]] == []


def test_components_pay_what_the_answer_reports_and_are_drawn_by_it() -> None:
    mi, of = _two_pairs()
    deps = dependencies(mi)
    x = _apart(mi, of)
    paid = egress_per_component(mi, deps, x)
    assert np.isclose(paid.sum(), routed_egress(mi, x))
    assert paid[deps.component[of[0]]] > 30 * paid[deps.component[of[2]]] > 0
    assert paid[deps.component[of[4]]] == 0.0
    rng = np.random.default_rng(0)
    free = pick_components(deps, paid, rng, 2, len(mi.classes))
    # whole components only, and never the one that pays nothing
    assert free[of[0]] == free[of[1]] and free[of[2]] == free[of[3]] and not free[of[4]]


def test_a_free_class_is_offered_every_cloud_and_its_peer_s_sites() -> None:
    mi, of = _two_pairs()
    deps = dependencies(mi)
    x = _apart(mi, of)
    free = np.zeros(len(mi.classes), dtype=bool)
    free[[of[0], of[1]]] = True
    from broker.solver.model.layout import make_layout
    from broker.solver.model.universe import make_universe

    uni = make_universe(mi, make_layout(mi))
    offered = co_location_columns(mi, uni.cols, deps, x, free, per_cloud=1)
    cls, pool = uni.cols.cls(offered), uni.cols.pool[offered]
    api_sites = set(mi.site_idx[pool[cls == of[0]]].tolist())
    db_sites = set(mi.site_idx[pool[cls == of[1]]].tolist())
    assert AWS_DE in api_sites  # the API may follow its database into AWS
    assert AWS_US in db_sites and AZURE_US in db_sites
    assert not np.isin(cls, [of[2], of[3], of[4]]).any()  # only free classes


def test_lns_moves_a_service_with_its_callers_into_one_cloud() -> None:
    """From the placement that sends both pairs' traffic across clouds, LNS (no converged LP:
    one CG round) brings the heavy pair into one cloud: its traffic then leaves at 0.02."""
    mi, of = _two_pairs()
    bad = _apart(mi, of)
    assert feasible(mi, bad, class_nodes(mi, bad))
    opts = SolverOptions(max_cg_rounds=1, lns_mip_s=1.0)
    st = start(mi, [bad], time_limit_s=20, seed=0, opts=opts, prove=False)
    column_generation(st)
    st.incumbent, st.ub = None, np.inf
    first_incumbent(st, [bad])
    st.incumbent, st.ub = bad, objective(mi, st.lay, bad)  # the start, not the rounded LP
    large_neighbourhoods(st)
    assert st.incumbent is not None
    heavy = 200.0 * 1.073741824 * 2 / 2  # GiB/h in GB/h, both replicas' shares
    assert routed_egress(mi, st.incumbent) < 0.5 * routed_egress(mi, bad)
    assert routed_egress(mi, st.incumbent) >= 0.02 * heavy - 1e-6
    assert st.ub < objective(mi, st.lay, bad) - 5.0
