"""Kubernetes-style filter/score, a baseline implemented in the project.

Replicas are scheduled one at a time; nodes already open that fit and pass the workload's
filters are scored (LeastAllocated, topology spread over sites) and the best one wins; when none
fits, a cluster-autoscaler "price" expander opens a node of the cheapest node group (lowest node
price) that fits the replica. It keeps every hard constraint the solver keeps, and its placement
shares nodes: one of the search's starts.

The rules are broker/kube_model's (the simulator's `kube-default` reads them too); this module
is their static driver, fast over thousands of workloads: pods arrive one at a time, so each
scale-up is for one pending pod and the estimator's answer is one node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.kube_model import EPS, by_price, cheapest_node_group, fits, least_allocated, select_node
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.classes import SPOT, WorkloadData, spot_cap
from broker.solver.types import Placement


def kubernetes_filter_score(
    workloads: Sequence[WorkloadData],
    arr: PoolArrays,
) -> tuple[Placement, dict[int, int]] | None:
    """Replica-by-replica scheduling onto open nodes; returns (placement, nodes per pool)."""
    node_cost, vcpus, mem, gpus = arr.node_cost, arr.vcpus, arr.mem, arr.gpus
    max_nodes, site_idx, cap_idx = arr.max_nodes, arr.site_idx, arr.cap_idx
    total = sum(wd.w.replicas for wd in workloads)
    nodes_at = _Nodes(total)
    n_sites = int(site_idx.max()) + 1 if len(site_idx) else 0
    # per pool and per node as Python lists: read once per replica, where a numpy scalar costs more
    site_of, spot_of, cap_of = site_idx.tolist(), (cap_idx == SPOT).tolist(), max_nodes.tolist()
    pool_of: list[int] = []
    n_open = 0
    nodes: dict[int, int] = {}
    out: Placement = {}
    # the autoscaler's node groups, cheapest first: one stable sort of all pools, filtered per
    # candidate set (cand is ascending, so ties keep the order a sort of node_cost[cand] gives)
    price_order = by_price(node_cost)
    # per candidate set: the open nodes on its pools, as of how many nodes were open (nodes only
    # open, never close, so each workload reads just the nodes opened since its set was last seen).
    # By the set's pools, not only its signature: signatures that differ may allow the same pools
    # (the home cloud's cut leaves a few hundred sets of over a thousand signatures)
    usable: dict[tuple[object, ...], _Usable] = {}
    # a cheap fingerprint of the pools (how many, their sum, the first): the sets that have it
    by_pools: dict[tuple[int, int, int], list[tuple[IntArray, _Usable]]] = {}
    last: tuple[tuple[object, ...], _OpenNodes, int] | None = None  # the workload before: its view
    for k, wd in enumerate(workloads):
        w = wd.w
        need = np.array([w.cpu, w.memory_gib, w.gpus])
        used = need.tolist()
        u = usable.get(wd.signature)
        if u is None:
            cand = wd.cand
            same = by_pools.setdefault((len(cand), int(cand.sum()), int(cand[0]) if len(cand) else -1), [])
            u = next((v for c, v in same if np.array_equal(c, wd.cand)), None)
            if u is None:
                cand_mask = np.zeros(len(node_cost), dtype=bool)
                cand_mask[wd.cand] = True
                # compress, not a boolean index: the same pools, several times faster
                u = _Usable(cand_mask, price_order.compress(cand_mask[price_order]), arr)
                same.append((wd.cand, u))
            usable[wd.signature] = u
        u.catch_up(nodes_at, n_open)
        key = (id(u), *used)
        if last is not None and last[0] == key and last[1].u.n == last[2]:
            # the workload before had the same pools and request and nothing changed since: its
            # view is current (many single-replica workloads of one shape: no pass over all nodes)
            view = last[1].following(w.replicas)
        else:
            view = _OpenNodes(u, w.replicas, nodes_at, need)
        cap = spot_cap(w)
        spot_used = 0
        per_site: dict[int, int] = {}
        for _ in range(w.replicas):
            short = len(per_site) < w.min_sites
            capped = cap is not None and spot_used >= cap
            not_at = None
            if short and per_site:
                not_at = np.zeros(n_sites, dtype=bool)
                not_at[list(per_site)] = True
            j = view.best(no_spot=capped, not_at=not_at)
            if j < 0:
                # the first node group in price order that may take the replica (a capped
                # workload reads the order without spot pools: the same first group, sooner)
                def may_open(g: int, short: bool = short, per_site: dict[int, int] = per_site) -> bool:
                    return not (short and site_of[g] in per_site) and nodes.get(g, 0) < cap_of[g]

                g = cheapest_node_group(map(int, u.price_order_without_spot() if capped else u.price_order), may_open)
                if g < 0:
                    return None
                nodes[g] = nodes.get(g, 0) + 1
                pool_of.append(g)
                nodes_at.open(n_open, g, float(vcpus[g]), float(mem[g]), float(gpus[g]))
                j = view.add(n_open)
                n_open += 1
            best = int(u.nodes[j])
            p = pool_of[best]
            nodes_at.take(best, used)
            view.refresh(j, best)
            s = site_of[p]
            per_site[s] = per_site.get(s, 0) + 1
            if spot_of[p]:
                spot_used += 1
            out[(k, p)] = out.get((k, p), 0) + 1
        if len(per_site) < w.min_sites:
            return None
        last = (key, view, u.n)
    return out, nodes


class _Nodes:
    """The open nodes, in the order they opened: pool, what is left of each resource, and the
    LeastAllocated score (kept with what is left)."""

    def __init__(self, total: int) -> None:
        self.pool = np.zeros(total, dtype=np.int64)
        self.cpu = np.zeros(total)
        self.mem = np.zeros(total)
        self.gpus = np.zeros(total)
        self.score = np.zeros(total)
        # each node's pool as a byte and bit of a candidate set's bitmap (_Usable)
        self.byte = np.zeros(total, dtype=np.int64)
        self.bit = np.zeros(total, dtype=np.uint8)
        self.sizes: list[tuple[float, float]] = []  # each node's pool: vcpus, memory
        # the same four figures per node as Python floats, read once per replica (a numpy scalar
        # costs more to read; the arithmetic is the same IEEE doubles)
        self.left: list[list[float]] = []

    def open(self, node: int, pool: int, vcpus: float, mem: float, gpus: float) -> None:
        self.pool[node] = pool
        self.byte[node] = pool >> 3
        self.bit[node] = 1 << (7 - (pool & 7))
        self.cpu[node], self.mem[node], self.gpus[node] = vcpus, mem, gpus
        self.sizes.append((vcpus, mem))
        self.left.append([vcpus, mem, gpus, 0.0])  # scored by `take`, which follows at once

    def take(self, node: int, used: list[float]) -> None:
        """One replica's request off the node, and its score again."""
        left = self.left[node]
        cpu, mem, gpus = left[0] - used[0], left[1] - used[1], left[2] - used[2]
        vcpus, size = self.sizes[node]
        score = least_allocated(cpu, mem, vcpus, size)
        left[0], left[1], left[2], left[3] = cpu, mem, gpus, score
        self.cpu[node], self.mem[node], self.gpus[node], self.score[node] = cpu, mem, gpus, score


class _Usable:
    """The open nodes on one candidate set's pools, in node order, with their site and spot flag
    (a node's pool never changes), and the set's pools in price order."""

    def __init__(self, cand_mask: BoolArray, price_order: IntArray, arr: PoolArrays) -> None:
        # which pools are candidates, a bit per pool (a few KB where the mask takes a byte per pool)
        self.bits = np.packbits(cand_mask)
        self.price_order = price_order
        self._without_spot: IntArray | None = None
        self.arr = arr
        self.seen = 0
        self.n = 0  # nodes[:n], site[:n], spot[:n]; grown by doubling, not copied at each call
        self.nodes = np.empty(16, dtype=np.int64)
        self.site = np.empty(16, dtype=np.int64)
        self.spot = np.empty(16, dtype=bool)

    def price_order_without_spot(self) -> IntArray:
        if self._without_spot is None:
            self._without_spot = self.price_order[self.arr.cap_idx[self.price_order] != SPOT]
        return self._without_spot

    def _reserve(self, end: int) -> None:
        if end > len(self.nodes):
            grow = max(end, 2 * len(self.nodes))
            self.nodes, self.site, self.spot = (_grown(a, self.n, grow) for a in (self.nodes, self.site, self.spot))

    def catch_up(self, nodes: _Nodes, n_open: int) -> None:
        """Read the nodes opened since the last call."""
        if self.seen >= n_open:
            return
        mine = (self.bits[nodes.byte[self.seen : n_open]] & nodes.bit[self.seen : n_open]).nonzero()[0]
        if len(mine):
            end = self.n + len(mine)
            self._reserve(end)
            at = self.seen + mine
            pools = nodes.pool[at]
            self.nodes[self.n : end] = at
            self.site[self.n : end] = self.arr.site_idx[pools]
            self.spot[self.n : end] = self.arr.cap_idx[pools] == SPOT
            self.n = end
        self.seen = n_open

    def opened(self, node: int, pool: int) -> int:
        """A node this set's workload just opened on one of its pools (the newest: none opened
        since is missed); its position."""
        j = self.n
        self._reserve(j + 1)
        self.nodes[j] = node
        self.site[j] = self.arr.site_idx[pool]
        self.spot[j] = self.arr.cap_idx[pool] == SPOT
        self.n = j + 1
        self.seen = node + 1
        return j


def _grown(a: npt.NDArray[Any], n: int, size: int) -> npt.NDArray[Any]:
    out = np.empty(size, dtype=a.dtype)
    out[:n] = a[:n]
    return out


class _OpenNodes:
    """One workload's view of the open nodes it may use (its candidate set's, `_Usable`): the
    LeastAllocated score where a replica fits, -inf where it does not. Placing a replica changes
    one node, so each entry is kept up to date instead of recomputed over all nodes."""

    def __init__(self, usable: _Usable, replicas: int, nodes: _Nodes, need: FloatArray) -> None:
        self.u, self.nodes = usable, nodes
        n = usable.n
        # the filter's thresholds (kube_model.fits), read per node as floats by `refresh`
        self.d0, self.d1, self.d2 = (float(x) - EPS for x in need)
        # entries from n on are written by `refresh` before they are read
        self.fit_score = np.empty(n + replicas)  # each replica opens at most one node
        at = usable.nodes[:n]
        ok = fits(np.vstack([nodes.cpu[at], nodes.mem[at], nodes.gpus[at]]), need)
        self.fit_score[:n] = np.where(ok, nodes.score[at], -np.inf)

    def following(self, replicas: int) -> _OpenNodes:
        """This view for the next workload of the same pools and request, nothing changed since."""
        nxt = object.__new__(_OpenNodes)
        nxt.u, nxt.nodes, nxt.d0, nxt.d1, nxt.d2 = self.u, self.nodes, self.d0, self.d1, self.d2
        n = self.u.n
        if len(self.fit_score) >= n + replicas:
            nxt.fit_score = self.fit_score  # taken over: the workload before is done with it
        else:
            nxt.fit_score = np.empty(max(n + replicas, 2 * len(self.fit_score)))
            nxt.fit_score[:n] = self.fit_score[:n]
        return nxt

    def best(self, *, no_spot: bool, not_at: BoolArray | None) -> int:
        """The node with the highest score among those the replica fits (the first of equals;
        no spot node, none at the sites `not_at` (a flag per site), when asked), -1 when none."""
        n = self.u.n
        scores = self.fit_score[:n]
        if no_spot or not_at is not None:
            scores = scores.copy()
            if no_spot:
                scores[self.u.spot[:n]] = -np.inf
            if not_at is not None:
                scores[not_at[self.u.site[:n]]] = -np.inf
        return select_node(scores)

    def add(self, node: int) -> int:
        """A node just opened for this workload; its fit and score come with `refresh`."""
        return self.u.opened(node, int(self.nodes.pool[node]))

    def refresh(self, j: int, node: int) -> None:
        """Node `node` (at `j`) took a replica."""
        cpu, mem, gpus, score = self.nodes.left[node]
        self.fit_score[j] = score if cpu >= self.d0 and mem >= self.d1 and gpus >= self.d2 else -np.inf
