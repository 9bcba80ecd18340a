"""The solver tests' one placement checker: a PlacementResult against every rule of its request."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from broker.core.domain import CapacityType, PlacementResult
from broker.solver import PlacementProblem


def assert_valid(problem: PlacementProblem, res: PlacementResult) -> None:
    """Every replica placed once on a pool that passes its workload's filters (size, arch,
    capacity type, providers, residency, latency SLOs), spread and spot caps kept, enough nodes
    per pool for its load and no more than owned capacity, no node where nothing runs, costs that
    add up, and a bound that never exceeds the answer."""
    t = problem.table
    req = problem.request
    by_name = {w.name: w for w in req.workloads}
    placed: dict[str, int] = defaultdict(int)
    sites: dict[str, set[str]] = defaultdict(set)
    spot: dict[str, int] = defaultdict(int)
    load: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    seen: set[tuple[str, str]] = set()
    for a in res.assignments:
        assert (a.workload, a.pool) not in seen, "a (workload, pool) pair appears twice"
        seen.add((a.workload, a.pool))
        w = by_name[a.workload]
        pool = t.pools[t.pool_index[a.pool]]
        site = t.sites[t.site_index[pool.site]]
        assert a.replicas > 0 and a.site == pool.site
        placed[w.name] += a.replicas
        sites[w.name].add(pool.site)
        if pool.capacity_type == CapacityType.SPOT:
            spot[w.name] += a.replicas
        assert pool.capacity_type in w.capacity_types
        assert pool.arch in w.arch
        assert pool.vcpus >= w.cpu and pool.memory_gib >= w.memory_gib and pool.gpus >= w.gpus
        if w.residency is not None:
            assert w.residency.allows(site), (w.name, site.id)
        if w.providers:
            assert site.provider in w.providers
        for region, slo in w.latency_slo_ms.items():
            assert problem.user_rtt[region][t.site_index[site.id]] <= slo
        ld = load[a.pool]
        ld[0] += a.replicas * w.cpu
        ld[1] += a.replicas * w.memory_gib
        ld[2] += a.replicas * w.gpus
    for w in req.workloads:
        assert placed[w.name] == w.replicas, f"{w.name}: {placed[w.name]} of {w.replicas} replicas placed"
        assert len(sites[w.name]) >= w.min_sites, (w.name, sites[w.name])
        if w.max_spot_fraction is not None:
            assert spot[w.name] <= math.floor(w.max_spot_fraction * w.replicas + 1e-9)
    counts = {n.pool: n.count for n in res.nodes}
    for pid, ld in load.items():
        p = t.pools[t.pool_index[pid]]
        n = counts[pid]
        assert ld[0] <= n * p.vcpus + 1e-6 and ld[1] <= n * p.memory_gib + 1e-6 and ld[2] <= n * p.gpus + 1e-6
        if p.max_nodes is not None:
            assert n <= p.max_nodes
    compute = 0.0
    for node in res.nodes:
        assert node.pool in load, "nodes provisioned in a pool nobody uses"
        price = t.pools[t.pool_index[node.pool]].price_per_hour
        assert node.cost_per_hour == pytest.approx(node.count * price, abs=1e-6)
        compute += node.count * price
    total = compute + res.egress_cost_per_hour + res.storage_cost_per_hour
    assert math.isclose(res.cost_per_hour, total, rel_tol=1e-6, abs_tol=1e-5)
    # in USD/h when cost is the only objective and nothing runs now: then it is the cost
    assert res.lower_bound_per_hour <= res.objective_value + 1e-6
    assert res.status in ("optimal", "feasible")
    if res.status == "optimal":
        assert res.gap_pct <= 0.01 + 1e-9
    assert_packed(problem, res)


def assert_packed(problem: PlacementProblem, res: PlacementResult) -> None:
    """The answer's node assignments, checked from the request and the pools alone: every
    replica on exactly one node of the pool its assignment names, no node over one node of its
    pool in cpu, memory or GPUs, none over a workload's spread.max_per_node, nodes numbered
    0 .. count - 1 so that each pool's node count is the answer's `nodes`."""
    t = problem.table
    by_name = {w.name: w for w in problem.request.workloads}
    on_nodes: dict[tuple[str, str], int] = defaultdict(int)
    numbers: dict[str, list[int]] = defaultdict(list)
    for node in res.node_assignments:
        pool = t.pools[t.pool_index[node.pool]]
        numbers[node.pool].append(node.node)
        used = [0.0, 0.0, 0.0]
        assert node.replicas, f"node {node.node} of {node.pool} runs nothing"
        for r in node.replicas:
            w = by_name[r.workload]
            assert (r.cpu, r.memory_gib, r.gpus) == (w.cpu, w.memory_gib, w.gpus)
            assert r.replicas > 0
            if w.max_per_node is not None:
                assert r.replicas <= w.max_per_node, (node.pool, node.node, r.workload)
            on_nodes[(r.workload, node.pool)] += r.replicas
            used = [used[0] + r.replicas * w.cpu, used[1] + r.replicas * w.memory_gib, used[2] + r.replicas * w.gpus]
        assert used[0] <= pool.vcpus + 1e-6, (node.pool, node.node, "cpu", used[0], pool.vcpus)
        assert used[1] <= pool.memory_gib + 1e-6, (node.pool, node.node, "memory", used[1], pool.memory_gib)
        assert used[2] <= pool.gpus + 1e-6, (node.pool, node.node, "gpus", used[2], pool.gpus)
    placed = {(a.workload, a.pool): a.replicas for a in res.assignments}
    assert dict(on_nodes) == placed, "node assignments and assignments disagree"
    counts = {n.pool: n.count for n in res.nodes}
    assert {p: sorted(ns) for p, ns in numbers.items()} == {p: list(range(n)) for p, n in counts.items()}
