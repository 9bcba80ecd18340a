"""What one 5-minute step costs and how well it served, vectorised over nodes and replicas.

Requests are reservations, not limits: what hurts is contention. Per node and step, usage of
the replicas running there above the cores pods may use (the node's allocatable: its own less
what its Kubernetes and the DaemonSets reserve) is starved; replicas without a running node
are unavailable. Traffic reaches only running replicas, so the survivors of an interruption
carry its load. Every node not yet gone is billed (a starting node too), plus each placed
replica's volume at its node's site, plus egress between dependent workloads at different sites.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.simulate.cluster import GONE, READY, STARTING, Cluster
from broker.simulate.fleet import STEP_S
from broker.solver.problem import GIB_IN_GB

STEP_H = STEP_S / 3600.0
STEP_MIN = STEP_S / 60.0
SERIES = (
    "spend",
    "spend_compute",
    "spend_storage",
    "spend_egress",
    "demand_cpu",
    "used_cpu",
    "provisioned_cpu",
    "used_memory",
    "provisioned_memory",
    "starved_core_min",
    "unavailable_replica_min",
    "slo_violation_replica_min",
    "nodes",
    "spot_nodes",
    "pending",
)


@dataclass(frozen=True)
class Dependencies:
    src: IntArray
    dst: IntArray
    gib_per_hour: FloatArray


@dataclass
class Ledger:
    steps: int
    n_tenants: int
    series: dict[str, FloatArray] = field(init=False)
    tenant_demand: FloatArray = field(init=False)  # core-minutes per tenant
    tenant_unserved: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        self.series = {k: np.zeros(self.steps) for k in SERIES}
        self.tenant_demand = np.zeros(self.n_tenants)
        self.tenant_unserved = np.zeros(self.n_tenants)


def account(
    ledger: Ledger,
    c: Cluster,
    step: int,
    cpu: FloatArray,
    mem: FloatArray,
    *,
    deps: Dependencies,
    tenant_of: IntArray,
) -> None:
    """Charge and score step `step` ([now, now + STEP_S)) given each workload's total usage."""
    m = c.market
    t = m.table
    s = ledger.series
    n = c.n_nodes
    t0, t1 = c.now_s, c.now_s + STEP_S
    state = c.node_state[:n]
    billed = state != GONE
    pool = c.node_pool[:n]
    # share of the step each node runs pods: 1 when ready, the tail of the step when it gets ready within it
    ready_s = c.node_ready_s[:n]
    frac_node = np.where(state == READY, 1.0, 0.0)
    late = (state == STARTING) & (ready_s < t1)
    frac_node[late] = (t1 - np.maximum(ready_s[late], t0)) / STEP_S
    cap_cpu = t.vcpus[pool] * frac_node  # allocatable (market.py); billing and utilisation use the raw size
    cap_mem = t.memory_gib[pool] * frac_node

    r = c.n_reps
    alive = c.rep_alive[:r]
    node = c.rep_node[:r]
    w = c.rep_w[:r]
    placed = alive & (node >= 0)
    frac = np.zeros(r)
    frac[placed] = frac_node[node[placed]]
    n_w = len(cpu)
    running_w = np.bincount(w, weights=frac, minlength=n_w)
    served_w = running_w > 0
    per_cpu = np.where(served_w, cpu / np.where(served_w, running_w, 1.0), 0.0)
    per_mem = np.where(served_w, mem / np.where(served_w, running_w, 1.0), 0.0)
    on = np.flatnonzero(placed & (frac > 0))
    rep_cpu = per_cpu[w[on]] * frac[on]
    node_cpu = np.bincount(node[on], weights=rep_cpu, minlength=n)
    node_mem = np.bincount(node[on], weights=per_mem[w[on]] * frac[on], minlength=n)
    starved_node = np.maximum(node_cpu - cap_cpu, 0.0)

    # fairness: each replica's share of its node's shortfall, and workloads with nothing running
    share = np.divide(starved_node[node[on]], node_cpu[node[on]], out=np.zeros(len(on)), where=node_cpu[node[on]] > 0)
    starved_w = np.bincount(w[on], weights=rep_cpu * share, minlength=n_w)
    unserved_w = starved_w + np.where(served_w, 0.0, cpu)
    ledger.tenant_demand += np.bincount(tenant_of, weights=cpu, minlength=ledger.n_tenants) * STEP_MIN
    ledger.tenant_unserved += np.bincount(tenant_of, weights=unserved_w, minlength=ledger.n_tenants) * STEP_MIN

    site_of_node = t.site_idx[pool]
    storage = float(m.storage_hour[w[placed], site_of_node[node[placed]]].sum()) * STEP_H
    compute = float(c.price[pool[billed]].sum()) * STEP_H
    by_site = np.zeros((n_w, m.n_sites))
    np.add.at(by_site, (w[on], site_of_node[node[on]]), frac[on])
    egress = _egress(by_site, m.egress, deps) * STEP_H
    s["spend_compute"][step] = compute
    s["spend_storage"][step] = storage
    s["spend_egress"][step] = egress
    s["spend"][step] = compute + storage + egress
    s["demand_cpu"][step] = float(cpu.sum())
    s["used_cpu"][step] = float(np.minimum(node_cpu, cap_cpu).sum())
    s["provisioned_cpu"][step] = float(t.raw_vcpus[pool[billed]].sum())  # billed: the instance's size
    s["used_memory"][step] = float(np.minimum(node_mem, cap_mem).sum())
    s["provisioned_memory"][step] = float(t.raw_memory_gib[pool[billed]].sum())
    s["starved_core_min"][step] = float(starved_node.sum()) * STEP_MIN
    s["unavailable_replica_min"][step] = float((1.0 - frac[alive]).sum()) * STEP_MIN
    s["slo_violation_replica_min"][step] = float((by_site * ~m.latency_ok).sum()) * STEP_MIN
    s["nodes"][step] = float(billed.sum())
    s["spot_nodes"][step] = float((billed & (t.cap_idx[pool] == 1)).sum())
    s["pending"][step] = float((alive & ~(frac > 0)).sum())


def _egress(by_site: FloatArray, price: FloatArray, deps: Dependencies) -> float:
    """USD per hour: each dependency's traffic split as both ends' running replicas are."""
    if len(deps.src) == 0:
        return 0.0
    totals = by_site.sum(axis=1, keepdims=True)
    share = np.divide(by_site, totals, out=np.zeros_like(by_site), where=totals > 0)
    a, b = share[deps.src], share[deps.dst]
    per_gb = ((a @ price) * b).sum(axis=1)
    return float((deps.gib_per_hour * GIB_IN_GB * per_gb).sum())
