"""The nodes and replicas one policy runs, and the few things a policy may do to them.

Columnar (growable numpy arrays) so the engine's accounting and the policies' filters are
vectorised. A policy reads the arrays and acts only through `launch`, `bind`, `move`, `drain`
and `terminate`; the engine moves time forward (nodes become ready, sites fail, spot nodes are
reclaimed, replicas are added and removed).

A replica bound to a node that is still starting is pending until the node is ready (as a pod
nominated to a node being provisioned). A move is make-before-break: the replica keeps running
where it is until its new node is ready, and holds room on both meanwhile.
"""

from __future__ import annotations

import math

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.simulate.market import Market

STARTING, READY, GONE = 0, 1, 2


class PolicyError(RuntimeError):
    """A policy asked for something impossible (a node at a failed site, a replica that is not there)."""


def _grow(a: np.ndarray, n: int, fill: object) -> np.ndarray:
    if n <= len(a):
        return a
    out = np.full(max(n, 2 * len(a), 64), fill, dtype=a.dtype)
    out[: len(a)] = a
    return out


class Cluster:
    def __init__(self, market: Market, n_workloads: int) -> None:
        self.market = market
        self.price: FloatArray = market.table.price.copy()  # USD per node-hour now
        self.down: set[int] = set()  # sites that offer nothing now
        self.now_s = 0.0
        self.step = 0
        self.instant = False  # the opening placement: nodes are there already
        # nodes
        self.n_nodes = 0
        self.node_pool = np.zeros(0, dtype=np.int64)
        self.node_state = np.zeros(0, dtype=np.int8)
        self.node_ready_s = np.zeros(0)
        self.node_drain = np.zeros(0, dtype=bool)
        self.node_rank_key = np.zeros(0, dtype=np.int64)  # launch order: oldest first per pool
        # replicas
        self.n_reps = 0
        self.rep_w = np.zeros(0, dtype=np.int64)
        self.rep_node = np.zeros(0, dtype=np.int64)
        self.rep_move = np.zeros(0, dtype=np.int64)
        self.rep_alive = np.zeros(0, dtype=bool)
        self.rep_pending_s = np.zeros(0)  # NaN when running
        self.alive_count = np.zeros(n_workloads, dtype=np.int64)
        # what happened, for the metrics
        self.sched_latency_s: list[float] = []
        self.migrations = 0
        # bumped by every change to nodes, replicas, prices or failed sites: what a policy or the
        # accounting derived from an unchanged version still holds, so a quiet step recomputes nothing
        self.version = 0

    # ---- views ---------------------------------------------------------------------

    @property
    def nodes(self) -> IntArray:
        """Nodes not gone (starting or ready)."""
        return np.flatnonzero(self.node_state[: self.n_nodes] != GONE)

    def node_site(self, nodes: IntArray) -> IntArray:
        return np.asarray(self.market.table.site_idx[self.node_pool[nodes]], dtype=np.int64)

    def node_capacity(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        p = self.node_pool[: self.n_nodes]
        t = self.market.table
        return t.vcpus[p], t.memory_gib[p], t.gpus[p]

    def pending(self) -> IntArray:
        """Replicas that need a node: alive and bound nowhere."""
        n = self.n_reps
        return np.flatnonzero(self.rep_alive[:n] & (self.rep_node[:n] < 0))

    def alive(self) -> IntArray:
        return np.flatnonzero(self.rep_alive[: self.n_reps])

    def running(self) -> BoolArray:
        """Per replica: alive on a ready node."""
        n = self.n_reps
        node = self.rep_node[:n]
        ok = self.rep_alive[:n] & (node >= 0)
        ok[ok] = self.node_state[node[ok]] == READY
        return ok

    def reserved(self, req_cpu: FloatArray, req_mem: FloatArray, req_gpu: FloatArray | None = None) -> FloatArray:
        """[3, node] what a policy's requests (per workload) hold on each node: replicas bound
        there and replicas moving there."""
        n = self.n_reps
        alive = self.rep_alive[:n]
        w = self.rep_w[:n]
        out = np.zeros((3, self.n_nodes))
        for target in (self.rep_node[:n], self.rep_move[:n]):
            on = alive & (target >= 0)
            idx = target[on]
            out[0] += np.bincount(idx, weights=req_cpu[w[on]], minlength=self.n_nodes)
            out[1] += np.bincount(idx, weights=req_mem[w[on]], minlength=self.n_nodes)
            if req_gpu is not None:
                out[2] += np.bincount(idx, weights=req_gpu[w[on]], minlength=self.n_nodes)
        return out

    def free(self, req_cpu: FloatArray, req_mem: FloatArray, req_gpu: FloatArray | None = None) -> FloatArray:
        """[3, node] room left on each node under a policy's requests (cpu, memory, GPUs)."""
        cpu, mem, gpu = self.node_capacity()
        return np.vstack([cpu, mem, gpu]) - self.reserved(req_cpu, req_mem, req_gpu)

    def replicas_on(self, node: int) -> IntArray:
        n = self.n_reps
        return np.flatnonzero(self.rep_alive[:n] & ((self.rep_node[:n] == node) | (self.rep_move[:n] == node)))

    # ---- actions -------------------------------------------------------------------

    def launch(self, pool: int) -> int:
        site = int(self.market.table.site_idx[pool])
        if site in self.down:
            raise PolicyError(f"site {self.market.table.sites[site].id} is down")
        i = self.n_nodes
        self.version += 1
        self.n_nodes += 1
        self.node_pool = _grow(self.node_pool, self.n_nodes, 0)
        self.node_state = _grow(self.node_state, self.n_nodes, GONE)
        self.node_ready_s = _grow(self.node_ready_s, self.n_nodes, math.inf)
        self.node_drain = _grow(self.node_drain, self.n_nodes, False)
        self.node_rank_key = _grow(self.node_rank_key, self.n_nodes, 0)
        self.node_pool[i] = pool
        self.node_drain[i] = False
        self.node_rank_key[i] = i
        if self.instant:
            self.node_state[i] = READY
            self.node_ready_s[i] = self.now_s
        else:
            self.node_state[i] = STARTING
            self.node_ready_s[i] = self.now_s + float(self.market.startup_s[site])
        return i

    def bind(self, replica: int, node: int) -> None:
        if not self.rep_alive[replica] or self.rep_node[replica] >= 0:
            raise PolicyError(f"replica {replica} is not pending")
        self._check_node(node)
        self.version += 1
        self.rep_node[replica] = node
        if self.node_state[node] == READY:
            self._started(np.array([replica]), self.now_s)

    def move(self, replica: int, node: int) -> None:
        if not self.rep_alive[replica] or self.rep_node[replica] < 0:
            raise PolicyError(f"replica {replica} is not placed")
        self._check_node(node)
        self.version += 1
        if node == self.rep_node[replica]:
            self.rep_move[replica] = -1
            return
        self.migrations += 1
        if self.node_state[node] == READY or self.node_state[self.rep_node[replica]] != READY:
            self.rep_node[replica] = node  # nothing to keep running meanwhile
            self.rep_move[replica] = -1
        else:
            self.rep_move[replica] = node

    def drain(self, node: int) -> None:
        """Terminate the node once no replica runs, waits or moves there."""
        self.node_drain[node] = True
        self.version += 1
        self.settle()

    def terminate(self, node: int) -> None:
        """Now: its replicas become pending, moves towards it are cancelled."""
        if self.node_state[node] == GONE:
            return
        self.node_state[node] = GONE
        self.version += 1
        n = self.n_reps
        self.rep_move[:n][self.rep_move[:n] == node] = -1
        lost = np.flatnonzero(self.rep_alive[:n] & (self.rep_node[:n] == node))
        moving = lost[self.rep_move[lost] >= 0]
        self.rep_node[moving] = self.rep_move[moving]  # its replacement was on its way
        self.rep_move[moving] = -1
        waiting = moving[self.node_state[self.rep_node[moving]] != READY]
        self.rep_pending_s[waiting] = self.now_s  # down until the replacement's node is up
        stranded = lost[self.rep_node[lost] == node]
        self.rep_node[stranded] = -1
        running = stranded[np.isnan(self.rep_pending_s[stranded])]
        self.rep_pending_s[running] = self.now_s

    def _check_node(self, node: int) -> None:
        if not 0 <= node < self.n_nodes or self.node_state[node] == GONE:
            raise PolicyError(f"node {node} does not exist")

    # ---- the engine's side ---------------------------------------------------------

    def add_replicas(self, w: int, count: int) -> None:
        start = self.n_reps
        self.version += 1
        self.n_reps += count
        self.rep_w = _grow(self.rep_w, self.n_reps, 0)
        self.rep_node = _grow(self.rep_node, self.n_reps, -1)
        self.rep_move = _grow(self.rep_move, self.n_reps, -1)
        self.rep_alive = _grow(self.rep_alive, self.n_reps, False)
        self.rep_pending_s = _grow(self.rep_pending_s, self.n_reps, np.nan)
        sl = slice(start, self.n_reps)
        self.rep_w[sl] = w
        self.rep_node[sl] = -1
        self.rep_move[sl] = -1
        self.rep_alive[sl] = True
        self.rep_pending_s[sl] = self.now_s
        self.alive_count[w] += count

    def remove_replicas(self, w: int, count: int) -> None:
        """Scale in: pending replicas go first, then the newest (as a ReplicaSet scales down)."""
        mine = np.flatnonzero(self.rep_alive[: self.n_reps] & (self.rep_w[: self.n_reps] == w))
        order = np.lexsort((-mine, self.rep_node[mine] >= 0))
        gone = mine[order[:count]]
        self.version += 1
        self.rep_alive[gone] = False
        self.rep_node[gone] = -1
        self.rep_move[gone] = -1
        self.rep_pending_s[gone] = np.nan
        self.alive_count[w] -= len(gone)
        self.settle()

    def _started(self, reps: IntArray, at_s: float) -> None:
        waiting = reps[~np.isnan(self.rep_pending_s[reps])]
        self.sched_latency_s.extend((at_s - self.rep_pending_s[waiting]).tolist())
        self.rep_pending_s[waiting] = np.nan

    def ready_until(self, t_s: float) -> None:
        """Nodes whose start finished by t_s are ready: replicas waiting there run, moves complete."""
        n = self.n_nodes
        done = np.flatnonzero((self.node_state[:n] == STARTING) & (self.node_ready_s[:n] <= t_s))
        if len(done) == 0:
            return
        self.node_state[done] = READY
        self.version += 1
        is_done = np.zeros(n, dtype=bool)
        is_done[done] = True
        r = self.n_reps
        node = self.rep_node[:r]
        alive = self.rep_alive[:r]
        waiting = np.flatnonzero(alive & (node >= 0) & ~np.isnan(self.rep_pending_s[:r]))
        waiting = waiting[is_done[node[waiting]]]
        for at in np.unique(self.node_ready_s[node[waiting]]):
            self._started(waiting[self.node_ready_s[node[waiting]] == at], float(at))
        move = self.rep_move[:r]
        arrived = np.flatnonzero(alive & (move >= 0))
        arrived = arrived[is_done[move[arrived]]]
        self.rep_node[arrived] = move[arrived]
        self.rep_move[arrived] = -1
        self.settle()

    def settle(self) -> None:
        """Draining nodes that nothing uses any more are terminated."""
        n = self.n_nodes
        draining = np.flatnonzero(self.node_drain[:n] & (self.node_state[:n] != GONE))
        if len(draining) == 0:
            return
        r = self.n_reps
        alive = self.rep_alive[:r]
        used = np.zeros(n, dtype=bool)
        for target in (self.rep_node[:r], self.rep_move[:r]):
            used[target[alive & (target >= 0)]] = True
        idle = draining[~used[draining]]
        if len(idle):
            self.node_state[idle] = GONE
            self.version += 1
