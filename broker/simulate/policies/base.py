"""The policy interface, and the kube-scheduler binding several policies share (its filter and
score are broker/kube_model's).

A policy is anything with a `name`, `start(ctx)` (once, before the replay: train, pick node
types) and `decide(cluster, view)` (every step: bind pending replicas, launch, move, drain).
It sees usage only up to the current step (`view.cpu_seen`), never the future. A policy may
keep `warnings` (a list of str): what makes its figures doubtful, copied to the run's result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.kube_model import fits, least_allocated, select_node
from broker.simulate.cluster import GONE, READY, Cluster
from broker.simulate.events import Event, Scenario
from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.spread import PerNode
from broker.simulate.usage import Usage
from broker.solver import SolverOptions


@dataclass(frozen=True)
class SimContext:
    fleet: FleetIn
    market: Market
    usage: Usage  # policies read history only: columns before usage.history_steps
    scenario: Scenario
    solver_options: SolverOptions | None = None  # the edge's (a MIP runner that holds time limits)

    def history(self) -> tuple[FloatArray, FloatArray]:
        h = self.usage.history_steps
        return self.usage.cpu[:, :h], self.usage.memory_gib[:, :h]


@dataclass(frozen=True)
class StepView:
    step: int
    now_s: float
    events: tuple[Event, ...]
    cpu_seen: FloatArray  # [workload, history + step]: usage observed so far (totals across replicas)
    memory_seen: FloatArray
    replicas: IntArray  # replicas each workload wants now


class Policy(Protocol):
    name: str

    def start(self, ctx: SimContext) -> None: ...

    def decide(self, cluster: Cluster, view: StepView) -> None: ...


PolicyFactory = Callable[[FleetIn, Market], Policy]


@dataclass(frozen=True)
class Requests:
    """What a policy reserves per replica of each workload."""

    cpu: FloatArray
    memory_gib: FloatArray
    gpus: FloatArray

    @staticmethod
    def declared(market: Market) -> Requests:
        ws = market.workloads
        return Requests(
            np.array([w.cpu for w in ws]), np.array([w.memory_gib for w in ws]), np.array([w.gpus for w in ws])
        )

    def of(self, w: int) -> FloatArray:
        return np.array([self.cpu[w], self.memory_gib[w], self.gpus[w]])


def schedule(
    c: Cluster,
    replicas: IntArray,
    req: Requests,
    pool_ok: BoolArray,
    *,
    nodes_ok: BoolArray | None = None,
    per_node: PerNode | None = None,
) -> IntArray:
    """Bind each replica, in order, to the open node that fits it and scores best (LeastAllocated),
    as kube-scheduler does. `pool_ok` [workload, pool] is what the workload's filters allow;
    `nodes_ok` [node] narrows the nodes; `per_node`: how many replicas of a workload a node may
    hold. Returns the replicas left pending."""
    if len(replicas) == 0:
        return replicas
    n = c.n_nodes
    free = c.free(req.cpu, req.memory_gib, req.gpus)
    cpu, mem, _ = c.node_capacity()
    cap = np.vstack([cpu, mem])
    usable = (c.node_state[:n] != GONE) & ~c.node_drain[:n]
    if nodes_ok is not None:
        usable &= nodes_ok[:n]
    pool = c.node_pool[:n]
    left: list[int] = []
    for r in replicas.tolist():
        w = int(c.rep_w[r])
        need = req.of(w)
        ok = usable & pool_ok[w, pool] & fits(free, need)
        if per_node is not None:
            ok &= per_node.room(w)
        hits = np.flatnonzero(ok)
        if len(hits) == 0:
            left.append(r)
            continue
        best = int(hits[select_node(least_allocated(free[0, hits], free[1, hits], cap[0, hits], cap[1, hits]))])
        c.bind(r, best)
        free[:, best] -= need
        if per_node is not None:
            per_node.add(w, best)
    return np.array(left, dtype=np.int64)


def schedule_pending(c: Cluster, req: Requests, pool_ok: BoolArray) -> IntArray:
    """The pending replicas, longest waiting first, bound to ready nodes, then to the nodes still
    starting (an autoscaler counts on them); returns those left, which need new nodes."""
    pending = c.pending()
    if len(pending) == 0:
        return pending
    pending = pending[np.argsort(c.rep_pending_s[pending], kind="stable")]
    ready = c.node_state[: c.n_nodes] == READY
    left = schedule(c, pending, req, pool_ok, nodes_ok=ready)
    return schedule(c, left, req, pool_ok)


def plan_moves(
    c: Cluster,
    replicas: IntArray,
    req: Requests,
    nodes_ok: BoolArray,
    pool_ok: BoolArray | None = None,
    per_node: PerNode | None = None,
) -> list[int] | None:
    """Where each replica would go (LeastAllocated among `nodes_ok` nodes that fit it, within
    `per_node`'s limits), or None when one of them fits nowhere: a node is emptied only if all
    its replicas find room."""
    free = c.free(req.cpu, req.memory_gib, req.gpus)
    cpu, mem, _ = c.node_capacity()
    cap = np.vstack([cpu, mem])
    out: list[int] = []
    for r in replicas.tolist():
        w = int(c.rep_w[r])
        need = req.of(w)
        ok = nodes_ok & fits(free, need)
        if pool_ok is not None:
            ok &= pool_ok[w, c.node_pool[: c.n_nodes]]
        if per_node is not None:
            ok &= per_node.room(w)
        hits = np.flatnonzero(ok)
        if len(hits) == 0:
            return None
        best = int(hits[select_node(least_allocated(free[0, hits], free[1, hits], cap[0, hits], cap[1, hits]))])
        free[:, best] -= need
        if per_node is not None:
            per_node.add(w, best)
        out.append(best)
    return out
