"""Explanations of given placements: cost shares, binding constraints, next best homes."""

from __future__ import annotations

import pytest

from broker.core.domain import Assignment, CapacityType, ResidencyPolicy, Workload
from broker.core.pooltable import PoolTable
from broker.solver.answer.explain import explain_assignments
from broker.solver.costs import placement_nodes
from broker.solver.prepare.candidates import prepare

from ..support.catalog import GDPR, problem, tied_table

GERMANY = ResidencyPolicy("de", allowed_countries=frozenset({"DE"}))
OD = CapacityType.ONDEMAND


def _explain(
    ws: list[Workload], placed: dict[tuple[str, str], int], tbl: PoolTable | None = None
) -> dict[tuple[str, str], Assignment]:
    """Rows by (workload, pool id) for a placement given as (workload, pool id) -> replicas."""
    p = problem(ws, tbl=tbl)
    t = p.table
    prep = prepare(p)
    index = {w.name: k for k, w in enumerate(ws)}
    x = {(index[w], t.pool_index[pool]): r for (w, pool), r in placed.items()}
    nodes = placement_nodes(prep.workloads, x, vcpus=t.vcpus, mem=t.memory_gib, gpus=t.gpus)
    rows = explain_assignments(p, prep.workloads, prep.masks_by_w, x, nodes, node_cost=prep.node_cost)
    return {(a.workload, a.pool): a for a in rows}


def test_next_best_is_the_cheapest_home_at_another_site_and_binding_names_cheaper_relaxations() -> None:
    # alone, a replica costs half a small node: 0.08 / 2 at gcp, 0.088 / 2 at aws eu; spot or a
    # US site would be cheaper, another architecture would not
    api = Workload("api", 2, 1, 2, residency=GDPR)
    rows = _explain([api], {("api", "gcp:europe-west1/small/ondemand"): 2})
    e = rows[("api", "gcp:europe-west1/small/ondemand")].explanation
    assert e.next_best == "aws:eu-central-1/small/ondemand"
    assert e.next_best_extra_per_hour == pytest.approx(2 * (0.088 - 0.08) / 2)
    assert e.binding == ("capacity_types:[ondemand,reserved] on api", "residency:gdpr-eu on api")
    assert e.cost_per_hour == pytest.approx(0.08)
    e = _explain([api], {("api", "aws:eu-central-1/small/ondemand"): 2})[
        ("api", "aws:eu-central-1/small/ondemand")
    ].explanation
    assert e.next_best == "gcp:europe-west1/small/ondemand"
    assert e.next_best_extra_per_hour == pytest.approx(-2 * (0.088 - 0.08) / 2)


def test_next_best_ties_go_to_the_first_pool_in_the_table() -> None:
    w = [Workload("w", 1, 1, 2)]
    tbl = tied_table([(1, "a", OD, 0.1, None), (0, "a", OD, 0.1, None), (2, "b", OD, 0.2, None)])
    rows = _explain(w, {("w", "azure:germanywestcentral/b/ondemand"): 1}, tbl)
    assert rows[("w", "azure:germanywestcentral/b/ondemand")].explanation.next_best == "gcp:europe-west3/a/ondemand"
    # on the cheapest home itself: the cheapest at another site, again the first of a tie
    tbl = tied_table([(2, "a", OD, 0.1, None), (0, "a", OD, 0.1, None), (1, "a", OD, 0.1, None)])
    e = _explain(w, {("w", "gcp:europe-west3/a/ondemand"): 1}, tbl)[("w", "gcp:europe-west3/a/ondemand")].explanation
    assert e.next_best == "azure:germanywestcentral/a/ondemand"
    assert e.next_best_extra_per_hour == 0.0


def test_workloads_sharing_a_node_split_its_cost_by_their_mean_share_of_the_load() -> None:
    ws = [Workload("a", 1, 1, 2), Workload("b", 1, 1, 2)]
    small = "gcp:europe-west1/small/ondemand"
    rows = _explain(ws, {("a", small): 1, ("b", small): 1})
    assert [rows[(w, small)].explanation.cost_per_hour for w in "ab"] == pytest.approx([0.04, 0.04])
    # with GPUs in use three dimensions count: a has 1/4 of the cpu, 1/2 of memory and GPUs
    ws = [Workload("a", 1, 2, 8, gpus=0.5), Workload("b", 1, 6, 8, gpus=0.5)]
    gpu = "gcp:europe-west1/gpu/ondemand"
    rows = _explain(ws, {("a", gpu): 1, ("b", gpu): 1})
    assert rows[("a", gpu)].explanation.cost_per_hour == pytest.approx(1.1 * 1.25 / 3, abs=1e-6)
    assert rows[("b", gpu)].explanation.cost_per_hour == pytest.approx(1.1 * 1.75 / 3, abs=1e-6)


def test_spread_binds_on_every_row_and_a_full_owned_pool_on_its_own() -> None:
    # 7 replicas of 16 vCPUs fill the 3 owned 48-vCPU nodes
    s = Workload("s", 8, 16, 64, min_sites=2, residency=GERMANY)
    owned, large = "private:fra-dc1/r740/reserved", "aws:eu-central-1/large/ondemand"
    rows = _explain([s], {("s", owned): 7, ("s", large): 1})
    spread, full = "spread.min_sites>=2 on s", f"capacity:{owned} max_nodes=3"
    assert rows[("s", owned)].explanation.binding == ("capacity_types:[ondemand,reserved] on s", spread, full)
    assert rows[("s", large)].explanation.binding == ("capacity_types:[ondemand,reserved] on s", spread)
