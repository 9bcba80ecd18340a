"""What the learned scheduler sees of one pending replica, and the actions it may take.

One decision per pending replica. The observation is a fixed-size vector in [0, 1]:

- the replica (REPLICA_FEATURES): declared cores and GiB, its highest use per replica over the
  last hour against the declared request (the floor of the broker's forecast sizing), spot tolerated, the share
  of sites its residency and latency SLOs allow, whether it has an SLO, its tenant's weight, how
  many replicas wait now, GPUs;
- SLOTS candidates (SLOT_FEATURES each): NODE_SLOTS running or starting nodes that can take it
  now, then POOL_SLOTS pools to launch a node on (price of the moment, free room after placing
  it, spot and its reclaim risk, start-up time, latency to the workload's users, site).

The action picks a slot. The mask offers only slots that keep every hard rule: the pool is one
the workload's residency, latency SLOs, capacity types and arch/GPU allow (`pool_ok`), the
site is up, the replica fits the node's room under the policy's requests (or a new node of the
pool), and the per-node spread limit holds. Pure numpy: the simulator's `ppo` policy and the
Gymnasium environment share it, and it needs no training library.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.kube_model import EPS, fits
from broker.simulate.cluster import GONE, READY, Cluster
from broker.simulate.market import SPOT, Market
from broker.simulate.policies.base import Requests, StepView
from broker.simulate.policies.bridge import per_replica_peak
from broker.simulate.policies.spread import PerNode

NODE_SLOTS = 8
POOL_SLOTS = 8
SLOTS = NODE_SLOTS + POOL_SLOTS
REPLICA_FEATURES = 9
SLOT_FEATURES = 12
OBS_SIZE = REPLICA_FEATURES + SLOTS * SLOT_FEATURES
# the layout of the vector above: a saved policy records it and is refused by another layout
OBS_LAYOUT = f"v1:r{REPLICA_FEATURES}:n{NODE_SLOTS}:p{POOL_SLOTS}:f{SLOT_FEATURES}"

# scales mapping raw figures into [0, 1] (clipped beyond): the fleet's sizes and prices sit well inside
CPU_SCALE = 16.0  # cores of one replica
MEMORY_SCALE = 64.0  # GiB of one replica
NODE_CPU_SCALE = 96.0  # cores of one node
PRICE_SHARE_SCALE = 0.5  # USD per hour of a node's price that one replica's share costs
PRICE_PER_CORE_SCALE = 0.1  # USD per core-hour
STARTUP_SCALE = 600.0  # seconds
RTT_SCALE = 200.0  # ms
PENDING_SCALE = 200.0  # replicas waiting


@dataclass(frozen=True)
class Decision:
    """One pending replica's observation, mask and what each slot stands for."""

    replica: int
    obs: FloatArray  # [OBS_SIZE]
    mask: BoolArray  # [SLOTS]
    nodes: IntArray  # [NODE_SLOTS] node of each node slot, -1 empty
    pools: IntArray  # [POOL_SLOTS] pool of each pool slot, -1 empty


class Observer:
    """Builds decisions for one market under one policy's requests and filters."""

    def __init__(self, market: Market, pool_ok: BoolArray, tenant_weight: FloatArray) -> None:
        """`tenant_weight`: per workload, its tenant's weight in the fleet."""
        self.market = market
        self.pool_ok = pool_ok
        t = market.table
        ws = market.workloads
        self.n_sites = max(t.n_sites, 1)
        allowed = (market.residency_ok & market.latency_ok).sum(axis=1)
        self.site_share = allowed / self.n_sites
        self.has_slo = np.array([bool(w.latency_slo_ms) for w in ws], dtype=np.float64)
        self.spot_ok = np.array([any(ct.value == "spot" for ct in w.capacity_types) for w in ws], dtype=np.float64)
        self.gpu = np.array([w.gpus > 0 for w in ws], dtype=np.float64)
        self.tenant_weight = tenant_weight / max(float(tenant_weight.max(initial=0.0)), EPS)
        # per site: the lowest RTT to any of the fleet's user regions (0 without user regions)
        rtts = list(market.user_rtt.values())
        self.site_rtt = np.min(np.vstack(rtts), axis=0) if rtts else np.zeros(t.n_sites)
        self.is_spot = (t.cap_idx == SPOT).astype(np.float64)
        self._peak_of: StepView | None = None
        self._peak_cpu = np.zeros(len(ws))

    def decide_order(self, c: Cluster) -> IntArray:
        """The pending replicas, longest waiting first (as kube-scheduler's queue)."""
        pending = c.pending()
        return pending[np.argsort(c.rep_pending_s[pending], kind="stable")]

    def decision(
        self,
        c: Cluster,
        view: StepView,
        replica: int,
        req: Requests,
        per_node: PerNode | None = None,
        room: Room | None = None,
    ) -> Decision:
        """`room`: the nodes' free room kept up to date across a step's decisions (computed
        here when not given)."""
        t = self.market.table
        w = int(c.rep_w[replica])
        need = req.of(w)
        n = c.n_nodes
        # nodes: usable, allowed, room under the requests, spread limit
        free = (room or Room(c, req)).free
        cpu_cap = c.node_capacity()[0]
        usable = (c.node_state[:n] != GONE) & ~c.node_drain[:n] & self.pool_ok[w, c.node_pool[:n]]
        if per_node is not None:
            usable &= per_node.room(w)[:n]
        ok = np.flatnonzero(usable & fits(free, need))
        after = (free[0, ok] - need[0]) / np.maximum(cpu_cap[ok], EPS)
        order = ok[np.argsort(after, kind="stable")]
        # the tightest fits and the roomiest: bin packing or spreading stays the policy's choice
        half = NODE_SLOTS // 2
        picked = order if len(order) <= NODE_SLOTS else np.concatenate([order[:half], order[-(NODE_SLOTS - half) :]])
        nodes = np.full(NODE_SLOTS, -1, dtype=np.int64)
        nodes[: len(picked)] = picked
        # pools: allowed, site up, a node of the pool holds the replica
        up = ~np.isin(t.site_idx, list(c.down))
        holds = (t.vcpus >= need[0] - EPS) & (t.memory_gib >= need[1] - EPS) & (t.gpus >= need[2] - EPS)
        cand = np.flatnonzero(self.pool_ok[w] & up & holds)
        share = np.maximum(need[0] / np.maximum(t.vcpus[cand], EPS), need[1] / np.maximum(t.memory_gib[cand], EPS))
        cost = c.price[cand] * share  # what the replica's share of a node costs per hour
        by_cost = cand[np.argsort(cost, kind="stable")]
        spot = by_cost[self.is_spot[by_cost] > 0][: POOL_SLOTS // 2]
        rest = by_cost[~np.isin(by_cost, spot)][: POOL_SLOTS - len(spot)]
        chosen = np.concatenate([spot, rest])
        pools = np.full(POOL_SLOTS, -1, dtype=np.int64)
        pools[: len(chosen)] = chosen

        obs = np.zeros(OBS_SIZE)
        peak_cpu = self._peak(view)
        declared_cpu = float(self.market.workloads[w].cpu)
        obs[:REPLICA_FEATURES] = [
            need[0] / CPU_SCALE,
            need[1] / MEMORY_SCALE,
            peak_cpu[w] / max(declared_cpu, EPS) / 2.0,
            self.spot_ok[w],
            self.site_share[w],
            self.has_slo[w],
            self.tenant_weight[w],
            (room.pending if room is not None else len(c.pending())) / PENDING_SCALE,
            self.gpu[w],
        ]
        slots = obs[REPLICA_FEATURES:].reshape(SLOTS, SLOT_FEATURES)
        mask = np.zeros(SLOTS, dtype=bool)
        r = c.n_reps
        mine = c.rep_alive[:r] & (c.rep_w[:r] == w) & (c.rep_node[:r] >= 0)
        same = np.bincount(c.rep_node[:r][mine], minlength=n)
        for i, node in enumerate(nodes.tolist()):
            if node < 0:
                continue
            pool = int(c.node_pool[node])
            wait = 0.0 if c.node_state[node] == READY else max(float(c.node_ready_s[node]) - c.now_s, 0.0)
            slots[i] = self._slot(
                pool, c, need, after_cpu=float(free[0, node] - need[0]), after_mem=float(free[1, node] - need[1])
            )
            slots[i, 1] = 0.0
            slots[i, 5] = wait / STARTUP_SCALE
            slots[i, 11] = same[node] / 4.0
            mask[i] = True
        for j, pool in enumerate(pools.tolist()):
            if pool < 0:
                continue
            i = NODE_SLOTS + j
            site = int(t.site_idx[pool])
            slots[i] = self._slot(
                pool,
                c,
                need,
                after_cpu=float(t.vcpus[pool] - need[0]),
                after_mem=float(t.memory_gib[pool] - need[1]),
            )
            slots[i, 1] = 1.0
            slots[i, 5] = float(self.market.startup_s[site]) / STARTUP_SCALE
            mask[i] = True
        np.clip(obs, 0.0, 1.0, out=obs)
        return Decision(replica=replica, obs=obs, mask=mask, nodes=nodes, pools=pools)

    def _peak(self, view: StepView) -> FloatArray:
        """Per workload, one replica's highest recent use (once per step: the view is the step's)."""
        if self._peak_of is not view:
            self._peak_of = view
            self._peak_cpu = per_replica_peak(view)[0]
        return self._peak_cpu

    def _slot(self, pool: int, c: Cluster, need: FloatArray, *, after_cpu: float, after_mem: float) -> FloatArray:
        t = self.market.table
        site = int(t.site_idx[pool])
        cpu, mem = float(t.vcpus[pool]), float(t.memory_gib[pool])
        price = float(c.price[pool])
        share = max(need[0] / max(cpu, EPS), need[1] / max(mem, EPS))
        return np.array(
            [
                1.0,  # a candidate
                0.0,  # a new node (set by the caller)
                price * share / PRICE_SHARE_SCALE,
                self.is_spot[pool],
                float(self.market.risk_month[pool]),
                0.0,  # start-up wait (set by the caller)
                after_cpu / max(cpu, EPS),
                after_mem / max(mem, EPS),
                cpu / NODE_CPU_SCALE,
                float(self.site_rtt[site]) / RTT_SCALE,
                (site + 1) / self.n_sites,
                0.0,  # replicas of the workload already there (set by the caller)
            ]
        )


class Room:
    """The nodes' free room under a policy's requests [3, node] and the replicas pending, kept
    up to date as one step's decisions bind replicas (cheaper than recomputing per decision)."""

    def __init__(self, c: Cluster, req: Requests) -> None:
        self.req = req
        self.free = c.free(req.cpu, req.memory_gib, req.gpus)
        self.pending = len(c.pending())

    def took(self, c: Cluster, replica: int, node: int) -> None:
        if node >= self.free.shape[1]:
            cpu, mem, gpu = c.node_capacity()
            extra = np.vstack([cpu, mem, gpu])[:, self.free.shape[1] :]
            self.free = np.hstack([self.free, extra])
        self.free[:, node] -= self.req.of(int(c.rep_w[replica]))
        self.pending -= 1


def act(c: Cluster, d: Decision, action: int, per_node: PerNode | None = None, room: Room | None = None) -> int:
    """Carry out `action` for the decision's replica: bind to the slot's node, or launch a node of
    the slot's pool and bind there. Returns the node. A masked-out action is a caller's bug."""
    if not 0 <= action < SLOTS or not d.mask[action]:
        raise ValueError(f"action {action} is not allowed for replica {d.replica}")
    node = int(d.nodes[action]) if action < NODE_SLOTS else c.launch(int(d.pools[action - NODE_SLOTS]))
    c.bind(d.replica, node)
    if room is not None:
        room.took(c, d.replica, node)
    if per_node is not None:
        per_node.n = max(per_node.n, c.n_nodes)
        per_node.add(int(c.rep_w[d.replica]), node)
    return node


def drain_empty(c: Cluster) -> None:
    """Nodes nothing is bound or moving to are drained (the learned policy only places)."""
    n = c.n_nodes
    used = np.zeros(n, dtype=bool)
    alive = c.rep_alive[: c.n_reps]
    for target in (c.rep_node[: c.n_reps], c.rep_move[: c.n_reps]):
        used[target[alive & (target >= 0)]] = True
    for node in np.flatnonzero((c.node_state[:n] != GONE) & ~c.node_drain[:n] & ~used).tolist():
        c.drain(node)
