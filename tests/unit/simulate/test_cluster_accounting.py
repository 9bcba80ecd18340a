"""Cluster state transitions and one step's accounting, on hand-made states."""

from __future__ import annotations

import numpy as np
import pytest

from broker.simulate.accounting import Dependencies, Ledger, account
from broker.simulate.cluster import GONE, READY, STARTING, Cluster, PolicyError
from broker.simulate.fleet import parse_fleet
from broker.simulate.market import build_market

NO_DEPS = Dependencies(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))


@pytest.fixture()
def market(fleet_doc, parts):
    return build_market(parse_fleet(fleet_doc), parts)


def _pool(market, pid):
    return market.table.pool_index[pid]


def test_bind_to_starting_node_runs_when_ready(market):
    c = Cluster(market, 3)
    c.add_replicas(0, 2)
    node = c.launch(_pool(market, "aws:us-east-1/m5.large/ondemand"))
    assert c.node_state[node] == STARTING
    assert c.node_ready_s[node] == pytest.approx(150.0)  # AWS start-up time
    for r in c.pending().tolist():
        c.bind(r, node)
    assert len(c.pending()) == 0 and not c.running()[:2].any()
    c.ready_until(149.0)
    assert c.node_state[node] == STARTING
    c.ready_until(150.0)
    assert c.node_state[node] == READY and c.running()[:2].all()
    assert c.sched_latency_s == [150.0, 150.0]


def test_move_is_make_before_break_and_terminate_strands(market):
    c = Cluster(market, 3)
    c.instant = True
    a = c.launch(_pool(market, "aws:us-east-1/m5.large/ondemand"))
    c.add_replicas(0, 1)
    c.bind(0, a)
    c.instant = False
    b = c.launch(_pool(market, "aws:us-east-1/m5.large/ondemand"))
    c.move(0, b)
    assert c.rep_node[0] == a and c.rep_move[0] == b and c.running()[0]
    c.drain(a)
    assert c.node_state[a] == READY  # still serving until the replacement is up
    c.ready_until(150.0)
    assert c.rep_node[0] == b and c.rep_move[0] == -1
    assert c.node_state[a] == GONE  # drained once nothing uses it
    assert c.migrations == 1
    c.now_s = 600.0
    c.terminate(b)
    assert list(c.pending()) == [0] and c.rep_pending_s[0] == 600.0


def test_no_launch_at_a_failed_site(market):
    c = Cluster(market, 3)
    c.down = {market.table.site_index["aws:us-east-1"]}
    with pytest.raises(PolicyError):
        c.launch(_pool(market, "aws:us-east-1/m5.large/ondemand"))


def test_scale_in_removes_pending_first(market):
    c = Cluster(market, 3)
    c.instant = True
    node = c.launch(_pool(market, "aws:us-east-1/m5.2xlarge/ondemand"))
    c.add_replicas(0, 3)
    c.bind(0, node)
    c.bind(1, node)
    c.remove_replicas(0, 2)
    assert c.rep_alive[:3].tolist() == [True, False, False]
    assert c.alive_count[0] == 1


def test_step_accounting_contention_spend_and_unavailability(market):
    c = Cluster(market, 3)
    c.instant = True
    pool = _pool(market, "aws:us-east-1/m5.large/ondemand")  # 2 vCPU, 8 GiB, 0.096 $/h
    alloc = float(market.table.vcpus[pool])  # less what EKS and the DaemonSets reserve
    assert alloc == pytest.approx(2.0 - 0.07 - 0.1)
    node = c.launch(pool)
    c.add_replicas(0, 2)
    c.add_replicas(1, 1)  # db: pending, no node
    c.bind(0, node)
    c.bind(1, node)
    c.instant = False
    ledger = Ledger(1, 2)
    cpu = np.array([3.0, 1.0, 0.0])  # web uses 3 cores on a 2-core node: 1.17 cores starved for 5 minutes
    mem = np.array([2.0, 4.0, 0.0])
    account(ledger, c, 0, cpu, mem, deps=NO_DEPS, tenant_of=np.array([0, 0, 1]))
    s = ledger.series
    assert s["starved_core_min"][0] == pytest.approx((3.0 - alloc) * 5.0)  # contention: above allocatable
    assert s["used_cpu"][0] == pytest.approx(alloc)
    assert s["unavailable_replica_min"][0] == pytest.approx(5.0)
    compute = 0.096 * 5 / 60
    assert s["spend_compute"][0] == pytest.approx(compute)
    assert s["provisioned_cpu"][0] == 2.0  # billed: the instance's own size
    assert s["provisioned_memory"][0] == 8.0
    # tenant a asked for 4 cores for 5 minutes, got 1.83 (1.17 starved, db's 1 unavailable)
    assert ledger.tenant_demand[0] == pytest.approx(20.0)
    assert ledger.tenant_unserved[0] == pytest.approx((3.0 - alloc + 1.0) * 5.0)


def test_node_ready_mid_step_counts_its_share(market):
    c = Cluster(market, 3)
    c.add_replicas(2, 1)
    node = c.launch(_pool(market, "gcp:us-east1/m5.large/ondemand"))  # GCP: 120 s to start
    c.bind(0, node)
    ledger = Ledger(1, 2)
    account(ledger, c, 0, np.array([0.0, 0.0, 1.0]), np.zeros(3), deps=NO_DEPS, tenant_of=np.array([0, 0, 1]))
    assert ledger.series["unavailable_replica_min"][0] == pytest.approx(2.0)
    assert ledger.series["used_cpu"][0] == pytest.approx(1.0)  # the running part serves all demand


def test_egress_between_sites(market):
    c = Cluster(market, 3)
    c.instant = True
    east = c.launch(_pool(market, "aws:us-east-1/m5.2xlarge/ondemand"))
    west = c.launch(_pool(market, "aws:us-west-2/m5.2xlarge/ondemand"))
    c.add_replicas(0, 1)
    c.add_replicas(1, 1)
    c.bind(0, east)
    c.bind(1, west)
    ledger = Ledger(1, 2)
    deps = Dependencies(np.array([0]), np.array([1]), np.array([12.0]))
    account(ledger, c, 0, np.zeros(3), np.zeros(3), deps=deps, tenant_of=np.array([0, 0, 1]))
    # 12 GiB/h at 0.02 $/GB for 5 minutes
    assert ledger.series["spend_egress"][0] == pytest.approx(12 * 1.073741824 * 0.02 * 5 / 60)
    # db's 50 GiB volume at 0.1 $/GB-month
    assert ledger.series["spend_storage"][0] == pytest.approx(50 * 1.073741824 * 0.1 / 730 * 5 / 60)


def test_losing_the_old_node_mid_move_waits_for_the_new_one(market):
    c = Cluster(market, 3)
    c.instant = True
    a = c.launch(_pool(market, "aws:us-east-1/m5.large/ondemand"))
    c.add_replicas(0, 1)
    c.bind(0, a)
    c.instant = False
    c.sched_latency_s.clear()  # as the engine does after the opening placement
    b = c.launch(_pool(market, "aws:us-east-1/m5.large/ondemand"))
    c.move(0, b)
    c.now_s = 60.0
    c.terminate(a)
    assert c.rep_node[0] == b and not c.running()[0]
    c.ready_until(150.0)
    assert c.running()[0] and c.sched_latency_s == [90.0]


def test_policies_pack_on_the_capacity_the_solver_solves_over(market):
    """Every policy packs on market.table, the broker policy solves over solver_table: one capacity,
    allocatable (the instance's size less what its Kubernetes and the DaemonSets reserve)."""
    t, solved = market.table, market.solver_table((), None)
    assert solved.n_pools > 0
    for i, p in enumerate(solved.pools):
        j = t.pool_index[p.id]
        assert (solved.vcpus[i], solved.memory_gib[i]) == (t.vcpus[j], t.memory_gib[j])
    assert (t.vcpus < t.raw_vcpus).all() and (t.memory_gib < t.raw_memory_gib).all()
