"""Both baselines give valid placements the broker never pays more than; and which placement each
policy makes, pinned on small catalogs."""

from __future__ import annotations

import numpy as np
import pytest

from broker.core.domain import CapacityType, ResidencyPolicy, Workload
from broker.core.pooltable import PoolTable
from broker.solver import solve
from broker.solver.baselines import baseline_costs
from broker.solver.baselines.greedy import _Shapes, greedy_cheapest_fit
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.candidates import prepare
from broker.solver.prepare.classes import WorkloadData
from broker.solver.segments import cheapest_per_site

from ..support.catalog import GDPR, US_ONLY, problem, tied_table
from ..support.checks import assert_valid

CASES = {
    "mixed": [
        Workload("api", 4, 1, 2, min_sites=2, residency=GDPR),
        Workload("db", 2, 4, 24, residency=GDPR),
        Workload("batch", 6, 2, 4, capacity_types=(CapacityType.SPOT, CapacityType.ONDEMAND), max_spot_fraction=0.5),
        Workload("us", 3, 0.5, 1, residency=US_ONLY),
    ],
    "many-small": [Workload(f"s{i}", 2, 0.5, 1) for i in range(10)],
}


@pytest.mark.parametrize("name", list(CASES))
def test_broker_beats_or_matches_both_baselines(name: str) -> None:
    p = problem(CASES[name])
    res = solve(p, time_limit_s=10)
    assert_valid(p, res)
    costs = baseline_costs(p)
    assert set(costs) == {"kubernetes_packer", "cheapest_fit", "kubernetes"}
    for policy, cost in costs.items():
        assert cost is not None, policy
        assert res.cost_per_hour <= cost + 1e-6, (policy, cost, res.cost_per_hour)
    # the headline is the strictest packer (every allowed pool), then the home cloud's, then the greedy
    names = [b.policy for b in res.baselines]
    assert names == ["kubernetes-packer", "kubernetes-packer-home-cloud", "greedy-cheapest-fit"]
    assert res.baseline.cost_per_hour == pytest.approx(costs["kubernetes"], abs=1e-5)
    assert res.baselines[1].cost_per_hour == pytest.approx(costs["kubernetes_packer"], abs=1e-5)
    assert res.baselines[2].cost_per_hour == pytest.approx(costs["cheapest_fit"], abs=1e-5)


GERMANY = ResidencyPolicy("de", allowed_countries=frozenset({"DE"}))
ON_SPOT = (CapacityType.ONDEMAND, CapacityType.SPOT)


def _run(
    ws: list[Workload], policy: str, tbl: PoolTable | None = None
) -> tuple[dict[tuple[str, str], int], dict[str, int]] | None:
    """A baseline's placement as (workload, pool id) -> replicas, and its open nodes per pool id."""
    p = problem(ws, tbl=tbl)
    t = p.table
    prep = prepare(p)
    arrays = PoolArrays(prep.node_cost, t.vcpus, t.memory_gib, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)
    if policy == "greedy":
        placed, nodes = greedy_cheapest_fit(prep.workloads, arrays), {}
    else:
        k8s = kubernetes_filter_score(prep.workloads, arrays)
        placed, nodes = k8s if k8s is not None else (None, {})
    if placed is None:
        return None
    names = [w.name for w in ws]
    return {(names[k], t.pools[q].id): r for (k, q), r in placed.items()}, {t.pools[q].id: n for q, n in nodes.items()}


GREEDY = {
    # on whole nodes: 4 replicas on two of us-east-1's small (0.072 each) rather than one owned
    # 48-vCPU node (0.9), the cheapest per replica only when full; b's 3 + 2 likewise, then azure
    "cheapest-pool-then-spread": (
        [Workload("a", 4, 1, 2), Workload("b", 5, 1, 2, min_sites=2)],
        {
            ("a", "aws:us-east-1/small/ondemand"): 4,
            ("b", "aws:us-east-1/small/ondemand"): 3,
            ("b", "azure:eastus/small/ondemand"): 2,
        },
    ),
    # us-east-1 per replica: small spot 0.0126, large spot 0.0138, medium spot 0.0150, small 0.036
    "spot-capped": (
        [Workload("c", 4, 1, 2, capacity_types=ON_SPOT, max_spot_fraction=0.5)],
        {("c", "aws:us-east-1/small/spot"): 2, ("c", "aws:us-east-1/small/ondemand"): 2},
    ),
    # 200 replicas fill owned nodes (0.9 / 48 per replica): the 3 there hold 144, the same
    # workload after it finds none
    "owned-nodes-run-out": (
        [Workload("d1", 200, 1, 2), Workload("d2", 200, 1, 2)],
        {
            ("d1", "private:fra-dc1/r740/reserved"): 144,
            ("d1", "aws:us-east-1/small/ondemand"): 56,
            ("d2", "aws:us-east-1/small/ondemand"): 200,
        },
    ),
}


@pytest.mark.parametrize("name", list(GREEDY))
def test_greedy_places_each_workload_on_its_cheapest_whole_nodes(name: str) -> None:
    ws, expected = GREEDY[name]
    placed = _run(ws, "greedy")
    assert placed is not None
    assert placed[0] == expected


def test_greedy_breaks_ties_within_a_site_by_table_order() -> None:
    # one node each, two replicas per node: the first pool in the table takes two
    tbl = tied_table([(0, "b", CapacityType.RESERVED, 0.1, 1), (0, "a", CapacityType.ONDEMAND, 0.1, 1)])
    placed = _run([Workload("w", 3, 1, 2)], "greedy", tbl)
    assert placed is not None
    assert placed[0] == {("w", "aws:eu-central-1/b/reserved"): 2, ("w", "aws:eu-central-1/a/ondemand"): 1}


def test_kubernetes_fills_open_nodes_then_opens_the_cheapest_node_group() -> None:
    # a's third replica needs a second small node, b fits on its free half
    placed = _run([Workload("a", 3, 1, 1), Workload("b", 1, 1, 1)], "kubernetes")
    assert placed == ({("a", "aws:us-east-1/small/ondemand"): 3, ("b", "aws:us-east-1/small/ondemand"): 1},
                      {"aws:us-east-1/small/ondemand": 2})  # fmt: skip


def test_kubernetes_spreads_then_breaks_score_ties_by_the_first_open_node() -> None:
    # the second replica must open another site; the third finds two equally empty nodes
    placed = _run([Workload("b", 3, 1, 1, min_sites=2)], "kubernetes")
    assert placed is not None
    assert placed[0] == {("b", "aws:us-east-1/small/ondemand"): 2, ("b", "azure:eastus/small/ondemand"): 1}
    # with smaller replicas the fourth goes to the emptier node, which is the second one
    placed = _run([Workload("b", 4, 0.5, 1, min_sites=2)], "kubernetes")
    assert placed is not None
    assert placed[0] == {("b", "aws:us-east-1/small/ondemand"): 2, ("b", "azure:eastus/small/ondemand"): 2}


def test_kubernetes_scores_least_allocated_and_caps_spot() -> None:
    # one spot replica at most: the second opens the cheapest on-demand node group
    placed = _run([Workload("c", 2, 1, 1, capacity_types=ON_SPOT, max_spot_fraction=0.5)], "kubernetes")
    assert placed is not None
    assert placed[0] == {("c", "aws:us-east-1/small/spot"): 1, ("c", "aws:us-east-1/small/ondemand"): 1}
    # LeastAllocated: an azure small node 3/8 used beats a large node half used
    ws = [Workload("s", 1, 1, 1, providers=("azure",)), Workload("big", 1, 8, 32), Workload("y", 1, 1, 1)]
    placed = _run(ws, "kubernetes")
    assert placed is not None
    assert placed[0][("big", "aws:us-east-1/large/ondemand")] == 1
    assert placed[0][("y", "azure:eastus/small/ondemand")] == 1


@pytest.mark.parametrize("policy", ["greedy", "kubernetes"])
def test_baselines_give_up_when_owned_capacity_runs_out(policy: str) -> None:
    # in Germany only the 3 owned nodes take 40 vCPUs, one replica each
    assert _run([Workload("big", 4, 40, 100, residency=GERMANY)], policy) is None
    assert _run([Workload("big", 3, 40, 100, residency=GERMANY)], policy) is not None


def test_cheapest_per_site_is_where_a_stable_sort_first_reaches_each_site() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        n_pools, n_sites = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        site_idx = rng.integers(0, n_sites, n_pools)
        cand = np.sort(rng.choice(n_pools, int(rng.integers(1, n_pools + 1)), replace=False))
        cost = rng.choice([0.1, 0.2, 0.3, np.inf, np.nan], len(cand))  # ties, and NaN sorted last
        ones = np.ones(n_pools)
        arrays = PoolArrays(ones, ones, ones, ones, ones, site_idx, np.zeros(n_pools, dtype=np.int64))
        shape = _Shapes(arrays).get(WorkloadData(Workload("w", 1, 1, 1), cand, np.zeros(len(cand)), ()))
        order, first = cheapest_per_site(cost, shape.by_site, shape.bounds)
        got = [int(site_idx[cand[shape.by_site[shape.bounds[g]]]]) for g in order]
        ranked = np.argsort(cost, kind="stable")
        reached = site_idx[cand[ranked]]
        assert got == list(dict.fromkeys(reached.tolist()))
        _, at = np.unique(reached, return_index=True)  # the position the sort reaches each site at
        assert sorted(first[order].tolist()) == sorted(ranked[at].tolist())
