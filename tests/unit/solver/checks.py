"""Check a PlacementResult against every constraint of its request (used by several tests)."""

from __future__ import annotations

import math
from collections import defaultdict

from broker.core.domain import CapacityType, PlacementResult
from broker.solver import PlacementProblem


def assert_valid(problem: PlacementProblem, res: PlacementResult) -> None:
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
        assert a.replicas > 0
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
        assert placed[w.name] == w.replicas, (w.name, placed[w.name], w.replicas)
        assert len(sites[w.name]) >= w.min_sites, (w.name, sites[w.name])
        if w.max_spot_fraction is not None:
            assert spot[w.name] <= math.floor(w.max_spot_fraction * w.replicas + 1e-9)
    counts = {n.pool: n.count for n in res.nodes}
    for pid, ld in load.items():
        p = t.pools[t.pool_index[pid]]
        n = counts[pid]
        assert ld[0] <= n * p.vcpus + 1e-9 and ld[1] <= n * p.memory_gib + 1e-9 and ld[2] <= n * p.gpus + 1e-9
        if p.max_nodes is not None:
            assert n <= p.max_nodes
    compute = sum(n.count * t.pools[t.pool_index[n.pool]].price_per_hour for n in res.nodes)
    total = compute + res.egress_cost_per_hour + res.storage_cost_per_hour
    assert math.isclose(res.cost_per_hour, total, rel_tol=1e-6, abs_tol=1e-5)
    assert res.lower_bound_per_hour <= res.objective_value + 1e-6
