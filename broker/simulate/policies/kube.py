"""`kube-default`: one cluster in one home region, kube-scheduler and the cluster autoscaler.

- kube-scheduler: pending pods in arrival order; filter (fits the node's unreserved declared
  requests, node affinity from residency), score LeastAllocated, bind.
- cluster-autoscaler, one node group of one on-demand instance type: pods that fit no node
  (counting nodes already coming up, as CA's "upcoming nodes") get new nodes, as many as a
  first-fit-decreasing estimate needs (CA's binpacking estimator). Scale down as CA does by
  default: a node whose requested cpu and memory are both under 50 % of its capacity (empty
  nodes too) for 10 minutes, whose pods all fit elsewhere, is drained and removed; empty nodes
  in bulk, at most one non-empty node per loop; no scale-down for 10 minutes after a scale-up.
Latency SLOs are not a scheduling concept here: they are only counted.

The same definition of "what the user would otherwise run" is the placement answer's
`kubernetes-packer-home-cloud` baseline (broker/solver/baselines/home.py): on-demand nodes of the home site,
declared requests, kube-scheduler filter / LeastAllocated, the autoscaler adding nodes.
"""

from __future__ import annotations

import numpy as np

from broker.errors import InvalidRequest
from broker.simulate.cluster import READY, Cluster
from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.base import (
    EPS,
    Requests,
    SimContext,
    StepView,
    first_fit_decreasing,
    plan_moves,
    schedule_pending,
)
from broker.solver.baselines.home import home_pool

SCALE_DOWN_DELAY_AFTER_ADD_S = 600.0


class KubeDefault:
    name = "kube-default"

    def __init__(self, fleet: FleetIn, market: Market) -> None:
        cfg = fleet.policies.kube_default
        t = market.table
        site = market.site_id(cfg.site, ["policies", "kube-default", "site"])
        pool = home_pool(t, cfg.site, cfg.instance_type)
        if pool is None:
            loc = ["policies", "kube-default", "instance_type"]
            msg = f"no on-demand {cfg.instance_type!r} offered at {cfg.site}"
            raise InvalidRequest(msg, errors=[{"loc": loc, "msg": msg}])
        self.pool = pool
        self.req = Requests.declared(market)
        self.pool_ok = np.zeros((len(market.workloads), t.n_pools), dtype=bool)
        self.pool_ok[:, self.pool] = market.residency_ok[:, site] & market.hardware_ok[:, self.pool]
        self.capacity = np.array([t.vcpus[self.pool], t.memory_gib[self.pool], t.gpus[self.pool]])
        # a pod larger than the node group's allocatable stays Pending for ever: a fleet that
        # cannot run under its own baseline is a configuration error, not a figure
        big = np.flatnonzero(
            self.pool_ok[:, self.pool]
            & (np.vstack([self.req.cpu, self.req.memory_gib]) > self.capacity[:2, None] + EPS).any(axis=0)
        )
        if len(big):
            w = market.workloads[int(big[0])]
            loc = ["policies", "kube-default", "instance_type"]
            msg = (
                f"{cfg.instance_type!r} allocates {self.capacity[0]:.2f} vCPUs and {self.capacity[1]:.2f} GiB to pods; "
                f"workload {w.name!r} requests {w.cpu:g} and {w.memory_gib:g} (choose a larger type)"
            )
            raise InvalidRequest(msg, errors=[{"loc": loc, "msg": msg}])
        self.utilization = cfg.scale_down_utilization
        self.unneeded_s = cfg.scale_down_unneeded_minutes * 60.0
        self.unneeded_since: dict[int, float] = {}
        self.last_scale_up_s = -np.inf

    def start(self, ctx: SimContext) -> None:
        pass

    def decide(self, c: Cluster, view: StepView) -> None:
        left = schedule_pending(c, self.req, self.pool_ok)
        if len(left):
            self._scale_up(c, left)
        self._scale_down(c)

    def _scale_up(self, c: Cluster, pending: np.ndarray) -> None:
        w = c.rep_w[pending]
        ok = self.pool_ok[w, self.pool]
        pending, w = pending[ok], w[ok]
        sizes = np.column_stack([self.req.cpu[w], self.req.memory_gib[w], self.req.gpus[w]])
        where, bins = first_fit_decreasing(sizes, self.capacity)
        if bins == 0 or self.pool_ok[:, self.pool].sum() == 0:
            return
        site = int(c.market.table.site_idx[self.pool])
        if site in c.down:
            return
        nodes = [c.launch(self.pool) for _ in range(bins)]
        for r, b in zip(pending.tolist(), where.tolist(), strict=True):
            if b >= 0:
                c.bind(r, nodes[b])
        self.last_scale_up_s = c.now_s

    def _scale_down(self, c: Cluster) -> None:
        n = c.n_nodes
        live = c.nodes
        live = live[(c.node_state[live] == READY) & ~c.node_drain[live]]
        if len(live) == 0:
            return
        held = c.reserved(self.req.cpu, self.req.memory_gib, self.req.gpus)
        cap = np.vstack(c.node_capacity()[:2])
        use = np.max(held[:2, live] / cap[:, live], axis=0)
        unneeded = use < self.utilization
        for node in live[~unneeded].tolist():
            self.unneeded_since.pop(node, None)
        for node in live[unneeded].tolist():
            self.unneeded_since.setdefault(node, c.now_s)
        if c.now_s < self.last_scale_up_s + SCALE_DOWN_DELAY_AFTER_ADD_S:
            return
        due = [x for x in live[unneeded].tolist() if c.now_s - self.unneeded_since[x] >= self.unneeded_s]
        moved_one = False
        for node in sorted(due, key=lambda x: (use[np.searchsorted(live, x)], x)):
            reps = c.replicas_on(node)
            if len(reps) == 0:
                c.drain(node)
                self.unneeded_since.pop(node, None)
                continue
            if moved_one:
                continue
            others = np.ones(n, dtype=bool)
            others[node] = False
            others &= c.node_state[:n] == READY
            targets = plan_moves(c, reps, self.req, others & ~c.node_drain[:n])
            if targets is not None:
                for r, target in zip(reps.tolist(), targets, strict=True):
                    c.move(int(r), target)
                c.drain(node)
                self.unneeded_since.pop(node, None)
                moved_one = True
