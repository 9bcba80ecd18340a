"""Nodes as the catalog says they are: constrained-vCPU sizes hold no more than their active vCPUs,
burstable nodes no more than their published baseline sustains (unless a workload allows
bursting), accelerated and HPC families only what opts into them, and a tenant's family quotas."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.allocatable import NodeOverhead, allocatable
from broker.core.domain import Arch, BurstablePolicy, CapacityType, Pool, Site, SiteKind, Workload
from broker.core.pooltable import PoolTable, build_pool_table
from broker.core.requirements import Requirement
from broker.errors import Infeasible
from broker.solver import solve
from pricing import snapshot
from pricing.node_classes import azure_active_vcpus, baseline_percent

from .support.catalog import problem
from .support.checks import assert_valid

OD, SPOT = CapacityType.ONDEMAND, CapacityType.SPOT
AWS = Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0)
AZURE = Site("azure:westeurope", "azure", SiteKind.PUBLIC, "westeurope", "NL", ("EU", "EEA", "NL"), 52.4, 4.9)


def _pool(site: Site, it: str, vcpus: float, gib: float, price: float, cap: CapacityType = OD, **kw: object) -> Pool:
    gpus = float(kw.get("gpus", 0.0))  # type: ignore[arg-type]
    model = kw.get("gpu_model")
    return Pool(
        Pool.make_id(site.id, it, cap), site.id, it, cap, Arch.AMD64, vcpus, gib, gpus, model,  # type: ignore[arg-type]
        price, None, site.provider, "2026-07-05",
    )  # fmt: skip


def _table(pools: list[Pool], *, burst: bool = False) -> PoolTable:
    sites = sorted({p.site for p in pools})
    return allocatable(build_pool_table([s for s in (AWS, AZURE) if s.id in sites], pools), NodeOverhead(), burst=burst)


def _pools_used(res: object) -> set[str]:
    return {n.pool.split("/")[1] for n in res.nodes}  # type: ignore[attr-defined]


# ---- constrained vCPUs ---------------------------------------------------------------------


@lru_cache(maxsize=1)
def _constrained_westeurope() -> PoolTable:
    """Every constrained-vCPU size the bundled snapshot prices on demand in West Europe, as stored."""
    df = snapshot.read_pools()
    df = df[(df["site"] == AZURE.id) & (df["capacity_type"] == "ondemand")]
    df = df[df["instance_type"].astype(str).str.match(r"^Standard_[A-Z]+\d+-\d+")]
    pools = [
        _pool(AZURE, str(it), float(v), float(m), float(p))
        for it, v, m, p in zip(df["instance_type"], df["vcpus"], df["memory_gib"], df["price_per_hour"], strict=True)
    ]
    assert len(pools) > 100
    return _table(pools)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(1, 8), st.sampled_from([1.0, 2.0, 4.0, 6.0, 12.0, 16.0, 24.0, 32.0]), st.integers(4, 64)),
        min_size=1,
        max_size=4,
    )
)
def test_no_placed_replica_exceeds_its_nodes_active_vcpus(shapes: list[tuple[int, float, int]]) -> None:
    t = _constrained_westeurope()
    ws = [Workload(f"w{i}", replicas=r, cpu=c, memory_gib=float(m)) for i, (r, c, m) in enumerate(shapes)]
    p = problem(ws, tbl=t)
    try:
        res = solve(p, time_limit_s=5)
    except Infeasible:
        return
    assert_valid(p, res)
    by_name = {w.name: w for w in ws}
    load: dict[str, float] = {}
    for a in res.assignments:
        load[a.pool] = load.get(a.pool, 0.0) + a.replicas * by_name[a.workload].cpu
    for node in res.nodes:
        active = azure_active_vcpus(node.pool.split("/")[1])  # from the name, not the catalog
        assert active is not None
        assert load[node.pool] <= node.count * active + 1e-6, (node.pool, load[node.pool], node.count)


# ---- burstable baselines -------------------------------------------------------------------

# Standard_B20ms: 20 vCPUs sustaining 16.83 % each (Microsoft: 202 credits banked an hour), 3.37 vCPUs;
# D16s_v5 is dearer but runs its 16 vCPUs all the time
B20 = _pool(AZURE, "Standard_B20ms", 20, 80, 0.832)
D16 = _pool(AZURE, "Standard_D16s_v5", 16, 64, 0.92)
D32 = _pool(AZURE, "Standard_D32s_v5", 32, 128, 1.84)


def test_published_baselines() -> None:
    assert baseline_percent("azure", "Standard_B20ms") == pytest.approx(16.833)
    assert baseline_percent("aws", "t3.xlarge") == 40.0  # 96 credits an hour on 4 vCPUs
    assert baseline_percent("aws", "t2.2xlarge") == 16.875
    assert baseline_percent("gcp", "e2-micro") == 12.5  # 0.25 of 2 vCPUs
    assert baseline_percent("azure", "Standard_B2ts_v2") == 20.0
    assert baseline_percent("aws", "m7i.large") == 100.0


def test_a_sustained_replica_is_not_placed_beyond_a_burstable_baseline() -> None:
    w = Workload("api", replicas=3, cpu=15.0, memory_gib=16)
    t = _table([B20, D16, D32])
    res = solve(problem([w], tbl=t), time_limit_s=5)
    assert "Standard_B20ms" not in _pools_used(res)
    i = t.pool_index[B20.id]
    assert t.vcpus[i] < 20 * 0.1684  # at its sustained capacity


def test_small_replicas_share_a_burstable_node_within_its_baseline() -> None:
    # 0.5 vCPU each: six fit the B20ms's 3.37 sustained vCPUs less reservations, and it is the cheapest node
    w = Workload("cron", replicas=6, cpu=0.5, memory_gib=4)
    t = _table([B20, D16])
    p = problem([w], tbl=t)
    res = solve(p, time_limit_s=5)
    assert_valid(p, res)
    for node in res.nodes:
        if "Standard_B20ms" in node.pool:
            on = sum(a.replicas for a in res.assignments if a.pool == node.pool)
            assert on * 0.5 <= node.count * 20 * 0.16833


def test_burstable_allow_places_at_full_vcpus_and_never_keeps_off() -> None:
    allow = Workload("batch", replicas=3, cpu=15.0, memory_gib=16, burstable=BurstablePolicy.ALLOW)
    t = _table([B20, D16, D32], burst=True)
    assert _pools_used(solve(problem([allow], tbl=t), time_limit_s=5)) == {"Standard_B20ms"}
    # in the same request, a workload with the default is kept off burstable nodes altogether
    steady = Workload("api", replicas=1, cpu=0.5, memory_gib=1)
    res = solve(problem([allow, steady], tbl=t), time_limit_s=5)
    assert all("Standard_B20ms" not in a.pool for a in res.assignments if a.workload == "api")
    never = Workload("db", replicas=1, cpu=0.5, memory_gib=1, burstable=BurstablePolicy.NEVER)
    res = solve(problem([never], tbl=_table([B20, D16])), time_limit_s=5)
    assert _pools_used(res) == {"Standard_D16s_v5"}


def test_burstable_requirement_key() -> None:
    t = _table([B20, D16])
    w = Workload("w", 1, 0.5, 1, requirements=(Requirement.parse("burstable", "In", ["false"]),))
    assert _pools_used(solve(problem([w], tbl=t), time_limit_s=5)) == {"Standard_D16s_v5"}
    w = Workload("w", 1, 0.5, 1, requirements=(Requirement.parse("cpu_baseline_percent", "Lt", ["50"]),))
    assert _pools_used(solve(problem([w], tbl=t), time_limit_s=5)) == {"Standard_B20ms"}


# ---- accelerated and HPC families, quotas --------------------------------------------------

INF = _pool(AWS, "inf1.6xlarge", 24, 48, 0.25, SPOT, gpus=4, gpu_model="AWS Inferentia")
HPC6A = _pool(AWS, "hpc6a.48xlarge", 96, 384, 2.88)
C6A = _pool(AWS, "c6a.2xlarge", 8, 16, 0.306)
C6A_BIG = _pool(AWS, "c6a.24xlarge", 96, 192, 3.672)
C6A_SPOT = _pool(AWS, "c6a.2xlarge", 8, 16, 0.30, SPOT)


def test_a_workload_without_accelerators_is_kept_off_accelerated_and_hpc_families() -> None:
    t = _table([INF, HPC6A, C6A, C6A_BIG, C6A_SPOT])
    caps = (OD, SPOT)
    small = Workload("svc", replicas=1, cpu=2, memory_gib=4, capacity_types=caps)
    big = Workload("solver", replicas=5, cpu=16, memory_gib=64)
    res = solve(problem([small, big], tbl=t), time_limit_s=5)
    assert _pools_used(res) <= {"c6a.2xlarge", "c6a.24xlarge"}
    assert "node_class" in res.rejected["svc"]
    # a requirement naming the class, or asking for accelerators, lets them in
    hpc = Workload("solver", 5, 16, 64, requirements=(Requirement.parse("node_class", "In", ["hpc"]),))
    assert _pools_used(solve(problem([hpc], tbl=t), time_limit_s=5)) == {"hpc6a.48xlarge"}
    inf = Workload("infer", 1, 2, 4, gpus=1, capacity_types=caps)
    assert _pools_used(solve(problem([inf], tbl=t), time_limit_s=5)) == {"inf1.6xlarge"}


def test_a_zero_family_quota_is_a_filter_named_in_the_conflict() -> None:
    t = _table([INF, HPC6A, C6A])
    inf = Workload("infer", 1, 2, 4, gpus=1, capacity_types=(OD, SPOT))
    p = problem([inf], tbl=t)
    p = type(p)(**{**p.__dict__, "family_quotas": {"aws:Inf": 0.0}})
    with pytest.raises(Infeasible) as exc:
        solve(p, time_limit_s=5)
    assert "quota:aws:Inf 0 vCPUs on infer" in exc.value.conflicts
    # a quota of at least one node's vCPUs leaves the pool a candidate
    p = type(p)(**{**p.__dict__, "family_quotas": {"aws:Inf": 24.0}})
    assert _pools_used(solve(p, time_limit_s=5)) == {"inf1.6xlarge"}


def test_node_classes_of_the_families_the_issue_names() -> None:
    t = _table([INF, HPC6A, C6A, B20, D16])
    cls = {t.pools[i].instance_type: t.attributes.of(i)["node_class"] for i in range(t.n_pools)}
    assert cls == {
        "inf1.6xlarge": "accelerated",
        "hpc6a.48xlarge": "hpc",
        "c6a.2xlarge": "general",
        "Standard_B20ms": "general",
        "Standard_D16s_v5": "general",
    }
    groups = {t.pools[i].instance_type: str(t.quota_group[i]) for i in range(t.n_pools)}
    assert groups["inf1.6xlarge"] == "aws:Inf" and groups["hpc6a.48xlarge"] == "aws:HPC"
    assert groups["c6a.2xlarge"] == "aws:Standard" and groups["Standard_B20ms"] == "azure:bmsv1"
    assert np.all(t.baseline[[t.pool_index[B20.id]]] < 0.17)


def test_a_pool_dominated_only_by_a_family_without_quota_is_still_a_candidate() -> None:
    # D4as_v5 is as large and cheaper than D4s_v5, so it dominates it; with no dasv5 quota the
    # tenant can only launch the D4s_v5 (a request with quotas solves over every pool: table_for)
    das = _pool(AZURE, "Standard_D4as_v5", 4, 16, 0.172)
    ds = _pool(AZURE, "Standard_D4s_v5", 4, 16, 0.192)
    t = _table([das, ds])
    assert t.dominated[t.pool_index[ds.id]]
    p = problem([Workload("api", 2, 1, 2)], tbl=t)
    p = type(p)(**{**p.__dict__, "family_quotas": {"azure:dasv5": 0.0}})
    assert _pools_used(solve(p, time_limit_s=5)) == {"Standard_D4s_v5"}


def test_a_positive_family_quota_caps_the_groups_vcpus_like_owned_capacity() -> None:
    # the cheapest pool per core is the Standard family's; with 16 vCPUs of Standard quota, only
    # two of its 8-vCPU nodes run and the rest goes to the dearer family the tenant may launch
    cheap = _pool(AWS, "c6a.2xlarge", 8, 16, 0.30)
    dear = _pool(AWS, "hpc6a.48xlarge", 96, 384, 2.88)
    t = _table([cheap, dear])
    ws = [Workload("api", 6, 3, 4, requirements=(Requirement.parse("node_class", "In", ("general", "hpc")),))]
    free = problem(ws, tbl=t)
    assert {n.pool.split("/")[1]: n.count for n in solve(free, time_limit_s=5).nodes} == {"c6a.2xlarge": 3}
    p = type(free)(**{**free.__dict__, "family_quotas": {"aws:Standard": 16.0}})
    res = solve(p, time_limit_s=5)
    assert_valid(p, res)
    counts = {n.pool.split("/")[1]: n.count for n in res.nodes}
    assert counts.get("c6a.2xlarge", 0) * 8 <= 16
    assert counts["hpc6a.48xlarge"] >= 1
    assert sum(a.replicas for a in res.assignments) == 6
