"""Allocatable capacity: what the solver packs replicas into is what Kubernetes can schedule."""

from __future__ import annotations

import numpy as np
import pytest

from broker.core.allocatable import NodeOverhead, allocatable
from broker.core.domain import Arch, CapacityType, PlacementRequest, Pool, Site, SiteKind, Workload
from broker.core.pooltable import build_pool_table
from broker.core.reservations import EVICTION_HARD_MEMORY_GIB, MIB
from broker.solver import PlacementProblem, solve

SITE = Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0)
SHAPES = [  # instance type, vcpus, GiB, on-demand price
    ("t3a.nano", 2, 0.5, 0.0047),
    ("t4g.micro", 2, 1.0, 0.0084),
    ("c5.xlarge", 4, 8, 0.17),
    ("m5.xlarge", 4, 16, 0.192),
    ("c5.2xlarge", 8, 16, 0.34),
]


def _table():
    pools = [
        Pool(
            Pool.make_id(SITE.id, name, CapacityType.ONDEMAND),
            SITE.id,
            name,
            CapacityType.ONDEMAND,
            Arch.AMD64,
            v,
            m,
            0,
            None,
            price,
            None,
            "aws",
            "2026-01-01",
        )
        for name, v, m, price in SHAPES
    ]
    return build_pool_table([SITE], pools)


def test_allocatable_is_raw_minus_reservations_and_daemonsets() -> None:
    raw = _table()
    t = allocatable(raw, NodeOverhead(daemonset_vcpus=0.1, daemonset_memory_gib=0.25))
    i = t.pool_index["aws:us-east-1/c5.xlarge/ondemand"]
    # EKS: 4 cores -> 80 m; c5.xlarge 58 pods -> 11 * 58 + 255 = 893 MiB; 100 MiB eviction
    assert t.vcpus[i] == pytest.approx(4 - 0.08 - 0.1)
    assert t.memory_gib[i] == pytest.approx(8 - 893 * MIB - EVICTION_HARD_MEMORY_GIB - 0.25)
    # the raw size stays visible, and applying it twice changes nothing
    assert (t.raw_vcpus[i], t.raw_memory_gib[i]) == (4.0, 8.0)
    again = allocatable(t, NodeOverhead(0.1, 0.25))
    assert np.array_equal(again.vcpus, t.vcpus) and np.array_equal(again.memory_gib, t.memory_gib)


def test_nodes_with_nothing_allocatable_leave_the_solver_table() -> None:
    t = allocatable(_table(), NodeOverhead()).compact()
    # t3a.nano: 512 MiB - (11 * 4 + 255) MiB - 100 MiB eviction - 256 MiB DaemonSets < 0
    assert "aws:us-east-1/t3a.nano/ondemand" not in t.pool_index
    assert "aws:us-east-1/c5.xlarge/ondemand" in t.pool_index


def test_overhead_setting_is_applied() -> None:
    raw = _table()
    small = allocatable(raw, NodeOverhead(0.0, 0.0), burst=True)  # burstable nodes at full size too
    big = allocatable(raw, NodeOverhead(1.0, 2.0), burst=True)
    assert small.vcpus - big.vcpus == pytest.approx(np.full(raw.n_pools, 1.0))
    assert np.all(small.memory_gib >= big.memory_gib)


def test_a_burstable_node_offers_its_sustained_baseline_unless_bursting_is_allowed() -> None:
    raw = _table()
    i = raw.pool_index["aws:us-east-1/t4g.micro/ondemand"]
    c = raw.pool_index["aws:us-east-1/c5.xlarge/ondemand"]
    # AWS: t4g.micro earns 12 credits an hour on 2 vCPUs, a 10 % baseline per vCPU
    assert raw.baseline[i] == pytest.approx(0.10) and raw.baseline[c] == 1.0
    overhead = NodeOverhead(0.0, 0.0)
    steady = allocatable(raw, overhead)
    burst = allocatable(raw, overhead, burst=True)
    assert steady.vcpus[i] == pytest.approx(2 * 0.10 - raw.reserved_vcpus[i])
    assert burst.vcpus[i] == pytest.approx(2 - raw.reserved_vcpus[i])
    assert steady.vcpus[c] == burst.vcpus[c]  # a node that is not burstable is the same in both
    assert not steady.burst_capacity and burst.burst_capacity


def _place(workload: Workload, *, alloc: bool) -> set[str]:
    raw = _table()
    t = (allocatable(raw, NodeOverhead()) if alloc else raw).compact()
    req = PlacementRequest(name="r", workloads=(workload,), user_regions=())
    result = solve(PlacementProblem(request=req, table=t), time_limit_s=10)
    return {n.pool.split("/")[1] for n in result.nodes}


def test_a_4_vcpu_8_gib_workload_no_longer_lands_on_a_4_vcpu_8_gib_node() -> None:
    w = Workload(name="api", cpu=4, memory_gib=8, replicas=3)
    assert _place(w, alloc=False) == {"c5.xlarge"}  # raw sizes: the pods would stay pending
    used = _place(w, alloc=True)
    assert used and "c5.xlarge" not in used and "m5.xlarge" not in used  # 4 vCPUs allocate < 4


def test_half_gib_replicas_no_longer_land_on_half_gib_nodes() -> None:
    w = Workload(name="tiny", cpu=0.25, memory_gib=0.5, replicas=2)
    assert _place(w, alloc=False) & {"t3a.nano", "t4g.micro"}  # two 0.5 GiB replicas on a 1 GiB node
    used = _place(w, alloc=True)
    assert used and not used & {"t3a.nano", "t4g.micro"}
