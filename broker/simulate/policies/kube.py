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

The rules are broker/kube_model's, which the placement answer's `kubernetes-packer-home-cloud`
baseline (broker/solver/baselines/home.py) reads too: on-demand nodes of the home site, declared
requests, kube-scheduler filter / LeastAllocated, the autoscaler's price expander adding nodes.
"""

from __future__ import annotations

import numpy as np

from broker.errors import InvalidRequest
from broker.kube_model import EPS, ScaleDown, cheapest_node_group, first_fit_decreasing, utilisation
from broker.simulate.cluster import READY, Cluster
from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.base import Requests, SimContext, StepView, plan_moves, schedule_pending
from broker.solver.baselines.home import home_pool


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
        self.scale_down = ScaleDown(cfg.scale_down_utilization, cfg.scale_down_unneeded_minutes * 60.0)

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
        site_of = c.market.table.site_idx
        # one node group: the expander's choice is it, unless its site is down
        if cheapest_node_group([self.pool], lambda g: int(site_of[g]) not in c.down) < 0:
            return
        nodes = [c.launch(self.pool) for _ in range(bins)]
        for r, b in zip(pending.tolist(), where.tolist(), strict=True):
            if b >= 0:
                c.bind(r, nodes[b])
        self.scale_down.scaled_up(c.now_s)

    def _scale_down(self, c: Cluster) -> None:
        n = c.n_nodes
        live = c.nodes
        live = live[(c.node_state[live] == READY) & ~c.node_drain[live]]
        if len(live) == 0:
            return
        held = c.reserved(self.req.cpu, self.req.memory_gib, self.req.gpus)
        cap = np.vstack(c.node_capacity()[:2])
        due = self.scale_down.due(live, utilisation(held[:2, live], cap[:, live]), c.now_s)

        def move_off(node: int) -> bool:
            reps = c.replicas_on(node)
            others = np.ones(n, dtype=bool)
            others[node] = False
            others &= c.node_state[:n] == READY
            targets = plan_moves(c, reps, self.req, others & ~c.node_drain[:n])
            if targets is None:
                return False
            for r, target in zip(reps.tolist(), targets, strict=True):
                c.move(int(r), target)
            return True

        self.scale_down.remove(due, empty=lambda x: len(c.replicas_on(x)) == 0, drain=c.drain, move_off=move_off)
