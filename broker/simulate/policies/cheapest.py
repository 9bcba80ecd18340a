"""`cheapest-fit`: SkyPilot-style. Each workload alone on its cheapest feasible offer across clouds.

A workload's replicas share nodes only with each other (its own cluster). For replicas that
need a node, the optimizer takes the offer with the lowest price per replica right now (node
price / replicas a node holds) among the pools the workload's constraints allow (residency,
latency SLOs, capacity types: spot where the workload tolerates it, as `use_spot`) at sites
that are up; a reclaimed or failed node is relaunched the same way (managed recovery), and
nodes left empty are torn down. Declared requests; nothing running is moved for a better price.
"""

from __future__ import annotations

import math

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.kube_model import EPS
from broker.simulate.cluster import GONE, Cluster
from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.base import Requests, SimContext, StepView, schedule


class CheapestFit:
    name = "cheapest-fit"

    def __init__(self, fleet: FleetIn, market: Market) -> None:
        self.market = market
        self.req = Requests.declared(market)
        self.owner = np.zeros(0, dtype=np.int64)

    def start(self, ctx: SimContext) -> None:
        pass

    def decide(self, c: Cluster, view: StepView) -> None:
        if len(self.owner) < c.n_nodes:
            self.owner = np.concatenate([self.owner, np.full(c.n_nodes - len(self.owner), -1)])
        pending = c.pending()
        for w in np.unique(c.rep_w[pending]).tolist():
            mine = pending[c.rep_w[pending] == w]
            own = self.owner[: c.n_nodes] == w
            left = schedule(c, mine, self.req, self.market.feasible, nodes_ok=own)
            if len(left):
                self._launch(c, int(w), left)
        self._tear_down(c)

    def _per_node(self, w: int) -> FloatArray:
        """Replicas of `w` a node of each pool holds (0 where the workload may not run)."""
        t = self.market.table
        fit = np.minimum(t.vcpus / self.req.cpu[w], t.memory_gib / self.req.memory_gib[w])
        if self.req.gpus[w] > 0:
            fit = np.minimum(fit, t.gpus / self.req.gpus[w])
        return np.asarray(np.floor(fit + EPS) * self.market.feasible[w], dtype=np.float64)

    def _launch(self, c: Cluster, w: int, replicas: IntArray) -> None:
        t = self.market.table
        per = self._per_node(w)
        up = ~np.isin(t.site_idx, list(c.down))
        ok = np.flatnonzero((per >= 1) & up)
        if len(ok) == 0:
            return
        # what the replicas waiting now cost on each offer: one node holds `per` of them
        cost = c.price[ok] * np.ceil(len(replicas) / per[ok])
        best = int(ok[int(np.argmin(cost))])
        fit = int(per[best])
        for i in range(math.ceil(len(replicas) / fit)):
            node = c.launch(best)
            self.owner = np.concatenate([self.owner, np.full(c.n_nodes - len(self.owner), -1)])
            self.owner[node] = w
            for r in replicas[i * fit : (i + 1) * fit].tolist():
                c.bind(r, node)

    def _tear_down(self, c: Cluster) -> None:
        n = c.n_nodes
        used = np.zeros(n, dtype=bool)
        alive = c.rep_alive[: c.n_reps]
        for target in (c.rep_node[: c.n_reps], c.rep_move[: c.n_reps]):
            used[target[alive & (target >= 0)]] = True
        for node in np.flatnonzero((c.node_state[:n] != GONE) & ~used).tolist():
            c.drain(node)
