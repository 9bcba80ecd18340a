"""The broker policy's answers to waiting replicas (bridging) and to bursts past the forecast
(burst room, burst spread, a floor on node size)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from broker.simulate.cluster import READY, STARTING, Cluster
from broker.simulate.fleet import parse_fleet
from broker.simulate.market import build_market
from broker.simulate.metrics import summary
from broker.simulate.policies.base import Requests, StepView, schedule
from broker.simulate.policies.bridge import bridge
from broker.simulate.policies.broker import BrokerPolicy
from broker.simulate.policies.spread import NO_LIMIT, PerNode
from tests.unit.simulate.test_policies import _run

WEB, DB, BATCH = 0, 1, 2  # the test fleet's workloads, in order


def _cluster(fleet_doc, parts, pool_id: str) -> tuple[Cluster, int]:
    market = build_market(parse_fleet(fleet_doc), parts)
    c = Cluster(market, len(market.workloads))
    c.instant = True
    node = c.launch(market.table.pool_index[pool_id])
    c.instant = False
    return c, node


def _view(c: Cluster, cpu_total: list[float], mem_total: list[float], replicas: list[int]) -> StepView:
    steps = 24
    return StepView(
        step=0,
        now_s=0.0,
        events=(),
        cpu_seen=np.repeat(np.array(cpu_total, dtype=float)[:, None], steps, axis=1),
        memory_seen=np.repeat(np.array(mem_total, dtype=float)[:, None], steps, axis=1),
        replicas=np.array(replicas, dtype=np.int64),
    )


def test_a_waiting_replica_runs_at_once_on_a_ready_node_whose_use_leaves_room(fleet_doc, parts) -> None:
    c, node = _cluster(fleet_doc, parts, "aws:us-east-1/m5.2xlarge/ondemand")
    # the node is full under the requests (4 batch replicas x 2 cores on 8 vCPUs less what is
    # reserved), yet they use a tenth of a core each
    c.add_replicas(BATCH, 4)
    for r in range(4):
        c.bind(r, node)
    c.add_replicas(WEB, 1)
    req = Requests(np.array([1.0, 2.0, 2.0]), np.array([2.0, 8.0, 4.0]), np.zeros(3))
    assert c.free(req.cpu, req.memory_gib, req.gpus)[0, node] < req.cpu[WEB]  # no room under the requests
    view = _view(c, cpu_total=[0.2, 0.0, 0.4], mem_total=[1.0, 0.0, 3.0], replicas=[1, 0, 4])
    bound = bridge(c, view, c.pending(), c.market.feasible, margin=0.5)
    assert bound.tolist() == [4] and int(c.rep_node[4]) == node and c.running()[4]


def test_no_bridge_where_use_leaves_no_room(fleet_doc, parts) -> None:
    c, node = _cluster(fleet_doc, parts, "aws:us-east-1/m5.large/ondemand")
    c.add_replicas(BATCH, 1)
    c.bind(0, node)
    c.add_replicas(WEB, 1)
    # batch uses 1.5 of the node's 2 vCPUs (less what is reserved); web's own peak is 0.6 core
    view = _view(c, cpu_total=[0.6, 0.0, 1.5], mem_total=[1.0, 0.0, 1.0], replicas=[1, 0, 1])
    assert len(bridge(c, view, c.pending(), c.market.feasible, margin=0.0)) == 0
    assert int(c.rep_node[1]) == -1
    # a starting node is no bridge either: the replica would wait for it all the same
    c2, starting = _cluster(fleet_doc, parts, "aws:us-east-1/m5.2xlarge/ondemand")
    c2.node_state[starting] = STARTING
    c2.add_replicas(WEB, 1)
    quiet = _view(c2, cpu_total=[0.1, 0.0, 0.0], mem_total=[0.5, 0.0, 0.0], replicas=[1, 0, 0])
    assert len(bridge(c2, quiet, c2.pending(), c2.market.feasible, margin=0.0)) == 0
    assert c2.node_state[starting] != READY


def test_bridging_removes_the_minutes_replicas_wait_for_new_nodes(fleet_doc, parts, traces) -> None:
    # the test fleet's outage (aws:us-east-1, 6-7 h), surge and spot reclaims leave replicas waiting
    runs = {}
    for on in (False, True):
        doc = {**fleet_doc, "policies": {**fleet_doc["policies"]}}
        doc["policies"]["broker"] = {**fleet_doc["policies"]["broker"], "bridge": on}
        _, _, runs[on] = _run("broker", doc, parts, traces)
    without, with_bridge = summary(runs[False]), summary(runs[True])
    assert without["unavailable_replica_min"] > 0
    assert with_bridge["unavailable_replica_min"] < without["unavailable_replica_min"]


def test_burst_room_asks_for_nodes_that_hold_the_declared_request(fleet_doc, parts) -> None:
    fleet = parse_fleet(fleet_doc)
    market = build_market(fleet, parts)
    for on in (True, False):
        policy = BrokerPolicy(fleet.model_copy(deep=True), market)
        policy.cfg = policy.cfg.model_copy(update={"burst_room": on})
        policy.req = Requests(np.array([0.3, 2.0, 0.5]), np.array([1.0, 8.0, 2.0]), np.zeros(3))
        req = policy._request("t", {WEB: 2, DB: 1, BATCH: 1}, with_deps=False)
        by_name = {w.name: w for w in req.workloads}
        floors = {
            w.name: [r.numbers[0] for r in w.requirements if r.attribute == "vcpus" and r.operator == "Gt"]
            for w in req.workloads
        }
        if on:
            # web and batch are sized below what they declared (1 and 2 cores): nodes of at least that
            assert floors["web"] == [0.99] and floors["batch"] == [1.99]
            assert floors["db"] == []  # sized at its declared request: any node that holds it
        else:
            assert all(v == [] for v in floors.values())
        assert by_name["web"].cpu == 0.3


def _policy(fleet_doc, parts, **cfg) -> tuple[BrokerPolicy, Cluster]:
    fleet = parse_fleet(fleet_doc)
    market = build_market(fleet, parts)
    policy = BrokerPolicy(fleet, market)
    policy.cfg = policy.cfg.model_copy(update=cfg)
    # web sized below its declared core (burst-prone), db and batch at what they declared
    policy.req = Requests(np.array([0.3, 2.0, 2.0]), np.array([1.0, 8.0, 4.0]), np.zeros(3))
    return policy, Cluster(market, len(market.workloads))


def test_burst_spread_asks_the_solver_for_one_burst_prone_replica_per_node(fleet_doc, parts) -> None:
    for on in (True, False):
        policy, _ = _policy(fleet_doc, parts, burst_spread=on)
        req = policy._request("t", {WEB: 3, DB: 2, BATCH: 2}, with_deps=False)
        limits = {w.name: w.max_per_node for w in req.workloads}
        assert limits == ({"web": 1, "db": None, "batch": None} if on else dict.fromkeys(limits))


def test_burst_spread_packs_one_workloads_replicas_onto_separate_nodes(fleet_doc, parts) -> None:
    pool = "aws:us-east-1/m5.2xlarge/ondemand"  # 8 vCPUs: room for all three web replicas at 0.3
    for on in (True, False):
        policy, c = _policy(fleet_doc, parts, burst_spread=on)
        c.instant = True
        c.add_replicas(WEB, 3)
        answer = SimpleNamespace(assignments=[SimpleNamespace(pool=pool, workload="web", replicas=3)])
        policy._realise(c, answer, c.alive())  # type: ignore[arg-type]  # only its assignments are read
        nodes = {int(c.rep_node[r]) for r in c.alive().tolist()}
        assert len(nodes) == (3 if on else 1)


def test_burst_spread_binds_a_waiting_replica_beside_none_of_its_own(fleet_doc, parts) -> None:
    c, node = _cluster(fleet_doc, parts, "aws:us-east-1/m5.2xlarge/ondemand")
    c.add_replicas(WEB, 2)
    req = Requests(np.array([0.3, 2.0, 2.0]), np.array([1.0, 8.0, 4.0]), np.zeros(3))
    limit = np.array([1, NO_LIMIT, NO_LIMIT], dtype=np.int64)
    left = schedule(c, c.pending(), req, c.market.feasible, per_node=PerNode(c, limit))
    assert len(left) == 1 and int(c.rep_node[0]) == node  # room for both under the requests, one each
    free = np.array([NO_LIMIT] * 3, dtype=np.int64)
    assert len(schedule(c, left, req, c.market.feasible, per_node=PerNode(c, free))) == 0


def test_min_node_vcpus_asks_every_workload_for_nodes_of_that_size(fleet_doc, parts) -> None:
    policy, _ = _policy(fleet_doc, parts, min_node_vcpus=8, burst_room=False)
    req = policy._request("t", {WEB: 1, DB: 1, BATCH: 1}, with_deps=False)
    for w in req.workloads:
        assert [r.numbers[0] for r in w.requirements if r.attribute == "vcpus" and r.operator == "Gt"] == [7.99]
