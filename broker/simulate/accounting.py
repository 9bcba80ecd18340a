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
    layout: Layout | None = field(init=False, default=None, repr=False)  # the last step's, while it holds

    def __post_init__(self) -> None:
        self.series = {k: np.zeros(self.steps) for k in SERIES}
        self.tenant_demand = np.zeros(self.n_tenants)
        self.tenant_unserved = np.zeros(self.n_tenants)


@dataclass(frozen=True)
class Layout:
    """Everything of a step's accounting that depends on where replicas run, not on their usage:
    it holds as long as the cluster's version does, unless a node gets ready within the step
    (its share of the step depends on the time), so quiet steps only redo the usage's sums."""

    version: int  # the cluster's; -1: this step's only
    n_nodes: int
    cap_cpu: FloatArray  # [node] allocatable times the share of the step the node runs pods
    cap_mem: FloatArray
    running_w: FloatArray  # [workload] replicas running (shares of the step)
    on_w: IntArray  # per replica running (any share of the step): its workload, node and share
    on_node: IntArray
    on_frac: FloatArray
    by_site: FloatArray  # [workload, site] running replicas
    fixed: dict[str, float]  # the series that do not depend on usage


def layout(c: Cluster, n_workloads: int, deps: Dependencies) -> Layout:
    """Where replicas run in the step [now, now + STEP_S), and what that costs whatever they use."""
    m = c.market
    t = m.table
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
    running_w = np.asarray(np.bincount(w, weights=frac, minlength=n_workloads), dtype=np.float64)
    on = np.flatnonzero(placed & (frac > 0))
    on_w, on_node, on_frac = w[on], node[on], frac[on]

    site_of_node = t.site_idx[pool]
    storage = float(m.storage_hour[w[placed], site_of_node[node[placed]]].sum()) * STEP_H
    compute = float(c.price[pool[billed]].sum()) * STEP_H
    by_site = (
        np.bincount(on_w * m.n_sites + site_of_node[on_node], weights=on_frac, minlength=n_workloads * m.n_sites)
        .reshape(n_workloads, m.n_sites)
        .astype(np.float64)
    )  # bincount of nothing is integer
    fixed = {
        "spend_compute": compute,
        "spend_storage": storage,
        "spend_egress": _egress(by_site, m.egress, deps) * STEP_H,
        "provisioned_cpu": float(t.raw_vcpus[pool[billed]].sum()),  # billed: the instance's size
        "provisioned_memory": float(t.raw_memory_gib[pool[billed]].sum()),
        "unavailable_replica_min": float((1.0 - frac[alive]).sum()) * STEP_MIN,
        "slo_violation_replica_min": float((by_site * ~m.latency_ok).sum()) * STEP_MIN,
        "nodes": float(billed.sum()),
        "spot_nodes": float((billed & (t.cap_idx[pool] == 1)).sum()),
        "pending": float((alive & ~(frac > 0)).sum()),
    }
    return Layout(
        version=-1 if late.any() else c.version,
        n_nodes=n,
        cap_cpu=cap_cpu,
        cap_mem=cap_mem,
        running_w=running_w,
        on_w=on_w,
        on_node=on_node,
        on_frac=on_frac,
        by_site=by_site,
        fixed=fixed,
    )


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
    s = ledger.series
    n_w = len(cpu)
    lay = ledger.layout
    if lay is None or lay.version < 0 or lay.version != c.version:
        lay = ledger.layout = layout(c, n_w, deps)
    n = lay.n_nodes
    served_w = lay.running_w > 0
    per_cpu = np.where(served_w, cpu / np.where(served_w, lay.running_w, 1.0), 0.0)
    per_mem = np.where(served_w, mem / np.where(served_w, lay.running_w, 1.0), 0.0)
    rep_cpu = per_cpu[lay.on_w] * lay.on_frac
    node_cpu = np.bincount(lay.on_node, weights=rep_cpu, minlength=n)
    node_mem = np.bincount(lay.on_node, weights=per_mem[lay.on_w] * lay.on_frac, minlength=n)
    starved_node = np.maximum(node_cpu - lay.cap_cpu, 0.0)

    # fairness: each replica's share of its node's shortfall, and workloads with nothing running
    on_cpu = node_cpu[lay.on_node]
    share = np.divide(starved_node[lay.on_node], on_cpu, out=np.zeros(len(on_cpu)), where=on_cpu > 0)
    starved_w = np.bincount(lay.on_w, weights=rep_cpu * share, minlength=n_w)
    unserved_w = starved_w + np.where(served_w, 0.0, cpu)
    ledger.tenant_demand += np.bincount(tenant_of, weights=cpu, minlength=ledger.n_tenants) * STEP_MIN
    ledger.tenant_unserved += np.bincount(tenant_of, weights=unserved_w, minlength=ledger.n_tenants) * STEP_MIN

    f = lay.fixed
    for key, value in f.items():
        s[key][step] = value
    s["spend"][step] = f["spend_compute"] + f["spend_storage"] + f["spend_egress"]
    s["demand_cpu"][step] = float(cpu.sum())
    s["used_cpu"][step] = float(np.minimum(node_cpu, lay.cap_cpu).sum())
    s["used_memory"][step] = float(np.minimum(node_mem, lay.cap_mem).sum())
    s["starved_core_min"][step] = float(starved_node.sum()) * STEP_MIN


def _egress(by_site: FloatArray, price: FloatArray, deps: Dependencies) -> float:
    """USD per hour: each dependency's traffic split as both ends' running replicas are."""
    if len(deps.src) == 0:
        return 0.0
    totals = by_site.sum(axis=1, keepdims=True)
    share = np.divide(by_site, totals, out=np.zeros_like(by_site), where=totals > 0)
    a, b = share[deps.src], share[deps.dst]
    per_gb = ((a @ price) * b).sum(axis=1)
    return float((deps.gib_per_hour * GIB_IN_GB * per_gb).sum())
