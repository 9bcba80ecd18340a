"""`ppo` and `broker+ppo`: the learned scheduler as simulator policies (docs/simulate.md).

- `ppo`: declared requests; every pending replica (the opening placement too) goes where the
  trained actor picks among the candidate nodes and pools (broker/simulate/rl/observe.py, the
  mask keeps every hard rule); nodes left empty are drained. It never moves a running replica.
- `broker+ppo`: the broker policy as it is (forecast-sized requests, its re-plans, drift
  relief and move queue), except that replicas pending between re-plans (a surge, a reclaimed
  spot node, a failed site) are placed by the actor under the broker's sized requests and
  spread limits, instead of the broker's bind-bridge-solve path; a replica the actor has no
  allowed slot for is left to the broker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray
from broker.simulate.cluster import Cluster
from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.base import Requests, SimContext, StepView
from broker.simulate.policies.broker import BrokerPolicy
from broker.simulate.policies.spread import PerNode
from broker.simulate.rl.model import Actor, load
from broker.simulate.rl.observe import Observer, Room, act, drain_empty


def tenant_weights(fleet: FleetIn) -> FloatArray:
    """Per workload, its tenant's weight."""
    weight = {t.name: t.weight for t in fleet.tenants}
    return np.array([weight[w.tenant] for w in fleet.workloads], dtype=np.float64)


def place_pending(
    c: Cluster, view: StepView, observer: Observer, actor: Actor, req: Requests, per_node: PerNode | None = None
) -> int:
    """Each pending replica, longest waiting first, placed where the actor picks; returns how
    many were placed (a replica with no allowed slot stays pending)."""
    order = observer.decide_order(c)
    if len(order) == 0:
        return 0
    placed = 0
    room = Room(c, req)
    for r in order.tolist():
        d = observer.decision(c, view, r, req, per_node, room)
        if not d.mask.any():
            continue
        act(c, d, actor.act(d.obs, d.mask), per_node, room)
        placed += 1
    return placed


class PPOPolicy:
    name = "ppo"

    def __init__(self, fleet: FleetIn, market: Market, model: Path | None = None) -> None:
        self.actor = load(model)
        self.req = Requests.declared(market)
        self.observer = Observer(market, market.feasible, tenant_weights(fleet))
        self.warnings: list[str] = []

    def start(self, ctx: SimContext) -> None:
        pass

    def decide(self, c: Cluster, view: StepView) -> None:
        place_pending(c, view, self.observer, self.actor, self.req)
        drain_empty(c)


class BrokerPlusPPO:
    name = "broker+ppo"

    def __init__(self, fleet: FleetIn, market: Market, model: Path | None = None) -> None:
        self.broker = BrokerPolicy(fleet, market)
        self.actor = load(model)
        # the nodes the broker's own solves may launch: its min_node_vcpus holds for the actor too
        floor = fleet.policies.broker.min_node_vcpus
        pool_ok: BoolArray = market.feasible & (market.table.vcpus >= floor - 0.01)[None, :]
        self.observer = Observer(market, pool_ok, tenant_weights(fleet))

    @property
    def warnings(self) -> list[str]:
        return self.broker.warnings

    def start(self, ctx: SimContext) -> None:
        self.broker.start(ctx)

    def decide(self, c: Cluster, view: StepView) -> None:
        if not c.instant and len(c.pending()):
            # the broker's own spread limits (burst_spread) hold for the actor's choices too
            per_node = PerNode(c, self.broker._limits())
            place_pending(c, view, self.observer, self.actor, self.broker.req, per_node)
        self.broker.decide(c, view)
