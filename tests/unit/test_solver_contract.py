"""Black-box tests of solve(): every answer keeps every rule of the contract.

Small synthetic catalogs keep these fast; property-based cases (hypothesis)
draw random requests and check each returned placement against the request.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.domain import (
    Arch,
    CapacityType,
    Dependency,
    PlacementRequest,
    PlacementResult,
    Pool,
    ResidencyPolicy,
    Site,
    SiteKind,
    UserRegion,
    Workload,
)
from broker.core.pooltable import PoolTable, build_pool_table
from broker.errors import Infeasible, InvalidRequest
from broker.solver import PlacementProblem, solve

SITES = [
    Site("aws:eu-central-1", "aws", SiteKind.PUBLIC, "eu-central-1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7),
    Site("gcp:europe-west1", "gcp", SiteKind.PUBLIC, "europe-west1", "BE", ("EU", "EEA", "BE"), 50.4, 3.8),
    Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0),
    Site("azure:eastus", "azure", SiteKind.PUBLIC, "eastus", "US", ("US",), 37.4, -79.0),
    Site("private:fra-dc1", "private", SiteKind.PRIVATE, "fra-dc1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7),
]
GDPR = ResidencyPolicy("gdpr-eu", allowed_jurisdictions=frozenset({"EEA"}))
US_ONLY = ResidencyPolicy("us-only", allowed_countries=frozenset({"US"}))

# (type, vcpus, GiB, gpus, arch, on-demand price) - prices scale by site below
SHAPES = [
    ("small", 2, 4, 0, Arch.AMD64, 0.08),
    ("medium", 4, 16, 0, Arch.AMD64, 0.19),
    ("large", 16, 64, 0, Arch.AMD64, 0.70),
    ("arm", 4, 8, 0, Arch.ARM64, 0.12),
    ("gpu", 8, 32, 1, Arch.AMD64, 1.10),
]
SITE_FACTOR = {"aws:eu-central-1": 1.1, "gcp:europe-west1": 1.0, "aws:us-east-1": 0.9, "azure:eastus": 0.95}


def _pools() -> list[Pool]:
    out = []
    for s in SITES[:4]:
        for name, v, m, g, arch, price in SHAPES:
            base = round(price * SITE_FACTOR[s.id], 6)
            for cap, factor in (
                (CapacityType.ONDEMAND, 1.0),
                (CapacityType.SPOT, 0.35),
                (CapacityType.RESERVED, 0.6),
            ):
                out.append(
                    Pool(
                        Pool.make_id(s.id, name, cap),
                        s.id,
                        name,
                        cap,
                        arch,
                        v,
                        m,
                        g,
                        "T4" if g else None,
                        round(base * factor, 6),
                        None,
                        s.provider,
                        "2026-01-01",
                    )
                )
    # owned capacity: 3 big nodes, cheap
    out.append(
        Pool(
            "private:fra-dc1/r740/reserved",
            "private:fra-dc1",
            "r740",
            CapacityType.RESERVED,
            Arch.AMD64,
            48,
            384,
            0,
            None,
            0.35,
            3,
            "tco-model",
            "2026-01-01",
        )
    )
    return out


TABLE: PoolTable = build_pool_table(SITES, _pools())
# RTT from each site to two user regions (ms)
USER_RTT = {
    "eu-users": np.array([8.0, 12.0, 95.0, 100.0, 3.0]),
    "us-users": np.array([95.0, 100.0, 6.0, 9.0, 96.0]),
}
REGIONS = (UserRegion("eu-users", 50.1, 8.7), UserRegion("us-users", 38.9, -77.0))


def problem(*workloads: Workload) -> PlacementProblem:
    req = PlacementRequest(name="t", workloads=tuple(workloads), user_regions=REGIONS, time_limit_s=5)
    egress = np.full((len(SITES), len(SITES)), 0.02)
    storage = np.tile(np.array([0.04, 0.08, 0.15]), (len(SITES), 1))
    storage[4] = 0.0
    return PlacementProblem(
        request=req,
        table=TABLE,
        user_rtt=USER_RTT,
        egress_usd_per_gb=egress,
        internet_egress_usd_per_gb=np.full(len(SITES), 0.09),
        storage_usd_per_gb_month=storage,
    )


def check(p: PlacementProblem, r: PlacementResult) -> None:
    """Assert every contract rule on a result."""
    t = p.table
    pools = {pool.id: pool for pool in t.pools}
    sites = {s.id: s for s in t.sites}
    by_w = {w.name: w for w in p.request.workloads}
    placed: dict[str, int] = defaultdict(int)
    load: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(3))
    w_sites: dict[str, set[str]] = defaultdict(set)
    spot: dict[str, int] = defaultdict(int)
    seen = set()
    for a in r.assignments:
        assert (a.workload, a.pool) not in seen, "a workload/pool pair appears twice"
        seen.add((a.workload, a.pool))
        w, pool = by_w[a.workload], pools[a.pool]
        assert a.replicas > 0 and a.site == pool.site
        placed[w.name] += a.replicas
        load[pool.id] += a.replicas * np.array([w.cpu, w.memory_gib, w.gpus])
        w_sites[w.name].add(pool.site)
        # per-node fit and filters
        assert pool.vcpus >= w.cpu and pool.memory_gib >= w.memory_gib and pool.gpus >= w.gpus
        assert pool.arch in w.arch
        assert pool.capacity_type in w.capacity_types
        if w.providers:
            assert sites[pool.site].provider in w.providers
        if w.residency:
            assert w.residency.allows(sites[pool.site])
        for region, slo in w.latency_slo_ms.items():
            assert p.user_rtt[region][t.site_index[pool.site]] <= slo
        if pool.capacity_type == CapacityType.SPOT:
            spot[w.name] += a.replicas
    for w in p.request.workloads:
        assert placed[w.name] == w.replicas, f"{w.name}: {placed[w.name]} of {w.replicas} replicas placed"
        assert len(w_sites[w.name]) >= w.min_sites
        if w.max_spot_fraction is not None:
            assert spot[w.name] <= math.floor(w.max_spot_fraction * w.replicas + 1e-9)
    node_cost = 0.0
    counts = {n.pool: n.count for n in r.nodes}
    for pid, ld in load.items():
        pool = pools[pid]
        n = counts[pid]
        assert ld[0] <= n * pool.vcpus + 1e-6 and ld[1] <= n * pool.memory_gib + 1e-6 and ld[2] <= n * pool.gpus + 1e-6
        if pool.max_nodes is not None:
            assert n <= pool.max_nodes
    for node in r.nodes:
        assert node.pool in load, "nodes provisioned in a pool nobody uses"
        assert node.cost_per_hour == pytest.approx(node.count * pools[node.pool].price_per_hour, abs=1e-6)
        node_cost += node.cost_per_hour
    assert r.cost_per_hour == pytest.approx(node_cost + r.egress_cost_per_hour + r.storage_cost_per_hour, abs=1e-5)
    assert r.lower_bound_per_hour <= r.cost_per_hour + 1e-6
    assert r.status in ("optimal", "feasible")
    if r.status == "optimal":
        assert r.gap_pct <= 0.01 + 1e-9


def wl(name: str = "api", **kw: object) -> Workload:
    base: dict[str, object] = {"replicas": 3, "cpu": 1.0, "memory_gib": 2.0}
    base.update(kw)
    return Workload(name=name, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("workload", "expect_site_in"),
    [
        (wl(), {"aws:us-east-1"}),  # cheapest region overall
        (wl(residency=GDPR), {"gcp:europe-west1"}),
        (wl(residency=GDPR, providers=("aws",)), {"aws:eu-central-1"}),
        (wl(latency_slo_ms={"eu-users": 10}), {"aws:eu-central-1"}),
        (wl(residency=US_ONLY, providers=("azure",)), {"azure:eastus"}),
    ],
)
def test_hard_constraints_steer_the_site(workload: Workload, expect_site_in: set[str]) -> None:
    p = problem(workload)
    r = solve(p)
    check(p, r)
    assert {a.site for a in r.assignments} <= expect_site_in


def test_capacity_types_default_excludes_spot_and_listing_spot_uses_it() -> None:
    r = solve(problem(wl()))
    assert all(not a.pool.endswith("/spot") for a in r.assignments)
    r2 = solve(problem(wl(capacity_types=(CapacityType.ONDEMAND, CapacityType.SPOT))))
    assert all(a.pool.endswith("/spot") for a in r2.assignments)
    assert r2.cost_per_hour < r.cost_per_hour


def test_max_spot_fraction_caps_spot_replicas() -> None:
    p = problem(wl(replicas=4, capacity_types=(CapacityType.ONDEMAND, CapacityType.SPOT), max_spot_fraction=0.5))
    r = solve(p)
    check(p, r)
    assert sum(a.replicas for a in r.assignments if a.pool.endswith("/spot")) == 2


def test_arch_and_gpu() -> None:
    p = problem(wl(arch=(Arch.ARM64,)), wl("trainer", replicas=1, cpu=4, memory_gib=16, gpus=1))
    r = solve(p)
    check(p, r)
    assert {a.pool.split("/")[1] for a in r.assignments if a.workload == "api"} == {"arm"}
    assert {a.pool.split("/")[1] for a in r.assignments if a.workload == "trainer"} == {"gpu"}


def test_spread_over_sites() -> None:
    p = problem(wl(replicas=4, min_sites=3))
    r = solve(p)
    check(p, r)
    assert len({a.site for a in r.assignments}) >= 3


def test_shared_nodes_are_cheaper_than_one_node_per_workload() -> None:
    # two workloads of half a large node each fit one large node together
    p = problem(wl("a", replicas=1, cpu=8, memory_gib=8), wl("b", replicas=1, cpu=8, memory_gib=8))
    r = solve(p)
    check(p, r)
    assert sum(n.count for n in r.nodes) == 1
    assert r.baseline.cost_per_hour is not None and r.cost_per_hour < r.baseline.cost_per_hour


def test_owned_capacity_is_used_first_and_never_exceeded() -> None:
    germany = ResidencyPolicy("de", allowed_countries=frozenset({"DE"}))
    # 12 replicas of 16 vCPUs: 3 fit an owned 48-vCPU node, only 3 owned nodes exist
    p = problem(wl(replicas=12, cpu=16, memory_gib=64, residency=germany))
    r = solve(p)
    check(p, r)
    assert sum(n.count for n in r.nodes if n.pool.startswith("private:")) == 3
    assert sum(a.replicas for a in r.assignments if a.site == "private:fra-dc1") == 9
    assert any(
        "capacity:private:fra-dc1/r740/reserved max_nodes=3" in b for a in r.assignments for b in a.explanation.binding
    )


def test_egress_pulls_dependent_workloads_together() -> None:
    heavy = Dependency("db", gib_per_hour=500.0)
    p = problem(wl("api", replicas=2, depends_on=(heavy,)), wl("db", replicas=1, cpu=2, memory_gib=4, residency=GDPR))
    r = solve(p)
    check(p, r)
    assert {a.site for a in r.assignments if a.workload == "api"} == {
        a.site for a in r.assignments if a.workload == "db"
    }
    assert r.egress_cost_per_hour == pytest.approx(0.0)


def test_storage_is_priced_at_the_site() -> None:
    p = problem(wl(replicas=2, storage_gib=100))
    r = solve(p)
    check(p, r)
    assert r.storage_cost_per_hour == pytest.approx(2 * 100 * 1.073741824 * 0.08 / 730, abs=1e-6)


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        (
            wl(residency=GDPR, latency_slo_ms={"us-users": 20}),
            {"residency:gdpr-eu on api", "latency_slo_ms:us-users<=20 on api"},
        ),
        (wl(cpu=64), {"size:cpu=64,memory_gib=2 on api"}),
        (wl(arch=(Arch.ARM64,), gpus=1), {"size:cpu=1,memory_gib=2,gpus=1 on api", "arch:[arm64] on api"}),
        (wl(replicas=1, min_sites=2), {"spread.min_sites>=2 on api", "replicas=1 on api"}),
        (
            wl(min_sites=3, residency=GDPR, providers=("aws", "gcp")),
            None,
        ),  # 2 public EU sites + none private: conflict
    ],
)
def test_infeasible_requests_name_a_minimal_conflict(workload: Workload, expected: set[str] | None) -> None:
    with pytest.raises(Infeasible) as exc:
        solve(problem(workload))
    conflicts = set(exc.value.conflicts)
    if expected is not None:
        assert conflicts == expected
    else:
        assert "spread.min_sites>=3 on api" in conflicts and "residency:gdpr-eu on api" in conflicts


def test_unknown_dependency_is_invalid() -> None:
    with pytest.raises(InvalidRequest) as exc:
        solve(problem(wl(depends_on=(Dependency("nope", 1.0),))))
    assert exc.value.errors[0]["loc"][-1] == "workload"


def test_explanations_name_binding_constraints_and_next_best() -> None:
    p = problem(wl(residency=GDPR))
    r = solve(p)
    a = r.assignments[0]
    assert "residency:gdpr-eu on api" in a.explanation.binding
    assert a.explanation.next_best is not None and not a.explanation.next_best.startswith(a.site + "/")
    assert r.rejected["api"]["residency"] > 0


workload_st = st.builds(
    lambda i, replicas, cpu, mem, arch, caps, res, slo, spread, spot: Workload(
        name=f"w{i}",
        replicas=replicas,
        cpu=cpu,
        memory_gib=mem,
        arch=arch,
        capacity_types=caps,
        residency=res,
        latency_slo_ms=slo,
        min_sites=min(spread, replicas),
        max_spot_fraction=spot,
    ),
    st.integers(0, 10_000),
    st.integers(1, 12),
    st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0, 12.0]),
    st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0, 32.0]),
    st.sampled_from([(Arch.AMD64,), (Arch.ARM64,), (Arch.AMD64, Arch.ARM64)]),
    st.sampled_from(
        [
            (CapacityType.ONDEMAND,),
            (CapacityType.ONDEMAND, CapacityType.SPOT),
            (CapacityType.ONDEMAND, CapacityType.RESERVED),
            (CapacityType.SPOT, CapacityType.RESERVED),
        ]
    ),
    st.sampled_from([None, GDPR, US_ONLY]),
    st.sampled_from([{}, {"eu-users": 15.0}, {"us-users": 10.0}, {"eu-users": 200.0}]),
    st.integers(1, 3),
    st.sampled_from([None, 0.5, 1.0]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(workload_st, min_size=1, max_size=4, unique_by=lambda w: w.name))
def test_every_answer_satisfies_every_constraint(workloads: list[Workload]) -> None:
    p = problem(*workloads)
    try:
        r = solve(p, time_limit_s=3)
    except Infeasible as exc:
        assert exc.conflicts, "an infeasible answer must name its conflicts"
        return
    check(p, r)
