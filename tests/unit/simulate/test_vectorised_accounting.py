"""The vectorised accounting against a per-replica loop, and the caches that keep quiet steps cheap
(the accounting's layout, karpenter-like's idle consolidation pass) against runs without them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from broker.simulate import accounting
from broker.simulate.accounting import STEP_H, STEP_MIN, Dependencies, Ledger, account
from broker.simulate.cluster import GONE, READY, STARTING, Cluster
from broker.simulate.fleet import STEP_S, parse_fleet
from broker.simulate.market import Market, build_market
from broker.simulate.metrics import TIMING_COLUMNS, summary
from broker.simulate.policies import karpenter
from broker.simulate.run import run_simulation
from broker.solver.problem import GIB_IN_GB


@pytest.fixture()
def market(fleet_doc, parts):
    return build_market(parse_fleet(fleet_doc), parts)


def _random_cluster(market: Market, rng: np.random.Generator) -> Cluster:
    """Nodes ready, starting (some getting ready within the step) and gone; replicas pending,
    bound, moving and removed."""
    n_w = len(market.workloads)
    c = Cluster(market, n_w)
    c.now_s = float(rng.integers(0, 50)) * STEP_S
    for _ in range(int(rng.integers(1, 9))):
        node = c.launch(int(rng.integers(0, market.table.n_pools)))
        kind = rng.integers(0, 4)
        if kind == 0:
            c.node_state[node] = STARTING
            c.node_ready_s[node] = c.now_s + float(rng.uniform(-60, 2 * STEP_S))  # within the step or after
        elif kind == 1:
            c.node_state[node] = GONE
        else:
            c.node_state[node] = READY
    for w in range(n_w):
        c.add_replicas(w, int(rng.integers(0, 5)))
    for r in range(c.n_reps):
        if rng.random() < 0.15:
            c.rep_alive[r] = False
            continue
        live = np.flatnonzero(c.node_state[: c.n_nodes] != GONE)
        if len(live) and rng.random() < 0.8:
            c.rep_node[r] = int(rng.choice(live))
            if rng.random() < 0.2:
                c.rep_move[r] = int(rng.choice(live))
    return c


def _per_replica(c: Cluster, cpu, mem, deps: Dependencies, tenant_of, n_tenants: int):
    """The step's figures, one replica and one node at a time."""
    m, t = c.market, c.market.table
    t0, t1 = c.now_s, c.now_s + STEP_S
    share_of: dict[int, float] = {}
    for node in range(c.n_nodes):
        state = c.node_state[node]
        if state == READY:
            share_of[node] = 1.0
        elif state == STARTING and c.node_ready_s[node] < t1:
            share_of[node] = (t1 - max(c.node_ready_s[node], t0)) / STEP_S
        else:
            share_of[node] = 0.0
    n_w = len(cpu)
    running = [0.0] * n_w
    reps = []  # (workload, node, share) of every alive replica
    for r in range(c.n_reps):
        if not c.rep_alive[r]:
            continue
        w, node = int(c.rep_w[r]), int(c.rep_node[r])
        share = share_of[node] if node >= 0 else 0.0
        reps.append((w, node, share))
        running[w] += share
    node_cpu = [0.0] * c.n_nodes
    node_mem = [0.0] * c.n_nodes
    by_site = np.zeros((n_w, m.n_sites))
    storage = 0.0
    for w, node, share in reps:
        if node < 0:
            continue
        site = int(t.site_idx[c.node_pool[node]])
        storage += m.storage_hour[w, site] * STEP_H
        if share > 0:
            node_cpu[node] += cpu[w] / running[w] * share
            node_mem[node] += mem[w] / running[w] * share
            by_site[w, site] += share
    out = {k: 0.0 for k in accounting.SERIES}
    unserved_w = [0.0 if running[w] > 0 else float(cpu[w]) for w in range(n_w)]
    for node in range(c.n_nodes):
        pool = int(c.node_pool[node])
        cap = t.vcpus[pool] * share_of[node]
        starved = max(node_cpu[node] - cap, 0.0)
        out["starved_core_min"] += starved * STEP_MIN
        out["used_cpu"] += min(node_cpu[node], cap)
        out["used_memory"] += min(node_mem[node], t.memory_gib[pool] * share_of[node])
        if c.node_state[node] != GONE:
            out["spend_compute"] += c.price[pool] * STEP_H
            out["provisioned_cpu"] += t.raw_vcpus[pool]
            out["provisioned_memory"] += t.raw_memory_gib[pool]
            out["nodes"] += 1
            out["spot_nodes"] += float(t.cap_idx[pool] == 1)
        for w, at, share in reps:
            if at == node and share > 0 and node_cpu[node] > 0:
                unserved_w[w] += cpu[w] / running[w] * share * starved / node_cpu[node]
    for _, _, share in reps:
        out["unavailable_replica_min"] += (1.0 - share) * STEP_MIN
        out["pending"] += float(share == 0)
    for w in range(n_w):
        for site in range(m.n_sites):
            if not m.latency_ok[w, site]:
                out["slo_violation_replica_min"] += by_site[w, site] * STEP_MIN
    for a, b, gib in zip(deps.src.tolist(), deps.dst.tolist(), deps.gib_per_hour.tolist(), strict=True):
        ta, tb = by_site[a].sum(), by_site[b].sum()
        if ta == 0 or tb == 0:
            continue
        for sa in range(m.n_sites):
            for sb in range(m.n_sites):
                share = by_site[a, sa] / ta * by_site[b, sb] / tb
                out["spend_egress"] += gib * GIB_IN_GB * m.egress[sa, sb] * share * STEP_H
    out["spend_storage"] = storage
    out["spend"] = out["spend_compute"] + out["spend_storage"] + out["spend_egress"]
    out["demand_cpu"] = float(np.sum(cpu))
    demand = np.zeros(n_tenants)
    unserved = np.zeros(n_tenants)
    for w in range(n_w):
        demand[tenant_of[w]] += cpu[w] * STEP_MIN
        unserved[tenant_of[w]] += unserved_w[w] * STEP_MIN
    return out, demand, unserved


@pytest.mark.parametrize("seed", range(12))
def test_account_equals_a_per_replica_loop(market, seed):
    rng = np.random.default_rng(seed)
    c = _random_cluster(market, rng)
    n_w = len(market.workloads)
    cpu, mem = rng.uniform(0, 6, n_w), rng.uniform(0, 12, n_w)
    cpu[rng.random(n_w) < 0.2] = 0.0
    deps = Dependencies(np.array([0, 2]), np.array([1, 0]), rng.uniform(0, 20, 2))
    tenant_of = np.array([0, 0, 1])
    ledger = Ledger(1, 2)
    account(ledger, c, 0, cpu, mem, deps=deps, tenant_of=tenant_of)
    want, demand, unserved = _per_replica(c, cpu, mem, deps, tenant_of, 2)
    for key in accounting.SERIES:
        assert ledger.series[key][0] == pytest.approx(want[key], rel=1e-9, abs=1e-9), key
    assert ledger.tenant_demand == pytest.approx(demand)
    assert ledger.tenant_unserved == pytest.approx(unserved)


def test_quiet_steps_reuse_the_layout_and_a_change_rebuilds_it(market):
    """Across steps the cached layout gives what a fresh one gives; any change to the cluster
    (here a bind, a price change through the version) is seen at the next step."""
    rng = np.random.default_rng(5)
    c = _random_cluster(market, rng)
    state = c.node_state[: c.n_nodes]
    state[state == STARTING] = READY  # no node getting ready mid-step
    n_w = len(market.workloads)
    deps = Dependencies(np.array([0]), np.array([1]), np.array([3.0]))
    tenant_of = np.array([0, 0, 1])
    cached, fresh = Ledger(6, 2), Ledger(6, 2)
    for step in range(6):
        c.now_s = step * STEP_S
        if step == 2:
            c.add_replicas(0, 1)
            live = np.flatnonzero(c.node_state[: c.n_nodes] != GONE)
            if len(live):
                c.bind(c.n_reps - 1, int(live[0]))
        if step == 4:
            c.price = c.price * 3.0
            c.version += 1  # as the engine does on a price change
        cpu, mem = rng.uniform(0, 6, n_w), rng.uniform(0, 12, n_w)
        before = cached.layout
        account(cached, c, step, cpu, mem, deps=deps, tenant_of=tenant_of)
        if step in (1, 3, 5):
            assert cached.layout is before  # nothing changed: reused
        fresh.layout = None
        account(fresh, c, step, cpu, mem, deps=deps, tenant_of=tenant_of)
    for key in accounting.SERIES:
        np.testing.assert_array_equal(cached.series[key], fresh.series[key], err_msg=key)
    np.testing.assert_array_equal(cached.tenant_unserved, fresh.tenant_unserved)
    assert cached.series["spend_compute"][4] == pytest.approx(3.0 * cached.series["spend_compute"][3])


def test_caches_change_no_figure(fleet_doc, parts, traces, monkeypatch):
    """The baselines' figures with the caches on equal those with every step recomputed."""
    fleet_doc["days"] = 1.0
    fleet_doc["policies"]["karpenter-like"] = {"site": "aws:us-east-1", "consolidate_after_minutes": 5}
    names = ["kube-default", "cheapest-fit", "karpenter-like"]

    def figures():
        sim = run_simulation(parse_fleet(fleet_doc), parts, traces, policies=names)
        rows = []
        for run in sim.runs:
            row = {k: v for k, v in summary(run).items() if k not in TIMING_COLUMNS}
            rows.append((row, {k: v.tolist() for k, v in run.ledger.series.items()}, run.sched_latency_s))
        return rows

    cached = figures()
    real_account = accounting.account

    def uncached(ledger, *args, **kwargs):
        ledger.layout = None
        real_account(ledger, *args, **kwargs)

    monkeypatch.setattr("broker.simulate.engine.account", uncached)
    real_consolidate = karpenter.KarpenterLike._consolidate

    def every_pass(self, c):
        self.idle_pass = None
        real_consolidate(self, c)

    monkeypatch.setattr(karpenter.KarpenterLike, "_consolidate", every_pass)
    assert figures() == cached
    assert not math.isnan(cached[0][0]["spend_usd"])


def test_karpenter_skips_only_a_pass_over_an_unchanged_cluster(fleet_doc, parts):
    """A consolidation pass that found nothing is skipped while the cluster is the same; once a
    replica goes away, the node it leaves empty is consolidated at the next pass."""
    fleet = parse_fleet(fleet_doc)
    market = build_market(fleet, parts)
    policy = karpenter.KarpenterLike(fleet, market)
    c = Cluster(market, len(market.workloads))
    c.instant = True
    pool = market.table.pool_index["aws:us-east-1/m5.large/spot"]  # spot: never replaced, only emptied
    a, b = c.launch(pool), c.launch(pool)
    c.add_replicas(0, 2)  # web: 1 core each, and a spot m5.large holds one
    c.bind(0, a)
    c.bind(1, b)
    c.instant = False
    c.now_s = 3600.0
    policy._consolidate(c)
    assert policy.idle_pass is not None and c.node_state[a] == READY and c.node_state[b] == READY
    version = c.version
    policy._consolidate(c)  # skipped: nothing changed
    assert c.version == version
    c.remove_replicas(0, 1)  # the newest goes: b is empty now
    policy._consolidate(c)
    assert c.node_state[b] == GONE and c.node_state[a] == READY
