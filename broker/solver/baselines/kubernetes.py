"""Kubernetes-style filter/score, a baseline implemented in the project.

Replicas are scheduled one at a time; nodes already open that fit and pass the workload's
filters are scored (LeastAllocated, topology spread over sites) and the best one wins; when none
fits, a cluster-autoscaler "price" expander opens a node of the cheapest node group (lowest node
price) that fits the replica. It keeps every hard constraint the solver keeps, and its placement
shares nodes: one of the search's starts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
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
    node_pool = np.zeros(total, dtype=np.int64)
    free = np.zeros((3, total))  # cpu, memory, gpus left on each open node
    n_open = 0
    nodes: dict[int, int] = {}
    out: Placement = {}
    cand_mask = np.zeros(len(node_cost), dtype=bool)
    # the autoscaler's node groups, cheapest first: one stable sort of all pools, filtered per
    # candidate set (cand is ascending, so ties keep the order a sort of node_cost[cand] gives)
    by_price = np.argsort(node_cost, kind="stable")
    price_orders: dict[tuple[object, ...], IntArray] = {}
    # per candidate set: the open nodes on its pools, as of how many nodes were open (nodes only
    # open, never close, so each workload reads just the nodes opened since its set was last seen)
    usable: dict[tuple[object, ...], tuple[int, IntArray]] = {}
    for k, wd in enumerate(workloads):
        w = wd.w
        d = np.array([w.cpu, w.memory_gib, w.gpus]) - 1e-9
        used = d + 1e-9
        cand_mask[:] = False
        cand_mask[wd.cand] = True
        if wd.signature not in price_orders:
            price_orders[wd.signature] = by_price[cand_mask[by_price]]
        price_order = price_orders[wd.signature]
        seen, mine = usable.get(wd.signature, (0, np.zeros(0, dtype=np.int64)))
        if seen < n_open:
            mine = np.concatenate([mine, seen + np.flatnonzero(cand_mask[node_pool[seen:n_open]])])
            usable[wd.signature] = (n_open, mine)
        view = _OpenNodes(mine, w.replicas, free, d, node_pool, arr)
        cap = spot_cap(w)
        spot_used = 0
        per_site: dict[int, int] = {}
        for _ in range(w.replicas):
            short = len(per_site) < w.min_sites
            ok = view.fits[: view.n]
            if cap is not None and spot_used >= cap:
                ok = ok & ~view.spot[: view.n]
            if short and per_site:
                ok = ok & ~np.isin(view.site[: view.n], list(per_site))
            hits = np.flatnonzero(ok)
            if len(hits):
                j = int(hits[int(np.argmax(view.score[hits]))])
            else:
                j = -1
                for g in map(int, price_order):  # the first few fit: no list of all
                    if short and int(site_idx[g]) in per_site:
                        continue
                    if cap is not None and cap_idx[g] == SPOT and spot_used >= cap:
                        continue
                    if nodes.get(g, 0) >= max_nodes[g]:
                        continue
                    nodes[g] = nodes.get(g, 0) + 1
                    node_pool[n_open] = g
                    free[:, n_open] = (vcpus[g], mem[g], gpus[g])
                    j = view.add(n_open)
                    n_open += 1
                    break
                if j < 0:
                    return None
            best = int(view.node[j])
            p = int(node_pool[best])
            free[:, best] -= used
            view.refresh(j)
            s = int(site_idx[p])
            per_site[s] = per_site.get(s, 0) + 1
            if cap_idx[p] == SPOT:
                spot_used += 1
            out[(k, p)] = out.get((k, p), 0) + 1
        if len(per_site) < w.min_sites:
            return None
    return out, nodes


class _OpenNodes:
    """One workload's view of the open nodes it may use (its candidate pools), in node order:
    whether a replica fits, the LeastAllocated score, site and spot flag. Placing a replica
    changes one node, so each entry is kept up to date instead of recomputed over all nodes."""

    def __init__(
        self, nodes: IntArray, replicas: int, free: FloatArray, d: FloatArray, node_pool: IntArray, arr: PoolArrays
    ) -> None:
        self.n = len(nodes)
        size = self.n + replicas  # each replica opens at most one node
        self.free, self.d, self.node_pool, self.arr = free, d, node_pool, arr
        self.node = np.zeros(size, dtype=np.int64)
        self.fits = np.zeros(size, dtype=bool)
        self.score = np.zeros(size)
        self.site = np.zeros(size, dtype=np.int64)
        self.spot = np.zeros(size, dtype=bool)
        pools = node_pool[nodes]
        f = free[:, nodes]
        self.node[: self.n] = nodes
        self.fits[: self.n] = (f[0] >= d[0]) & (f[1] >= d[1]) & (f[2] >= d[2])
        self.score[: self.n] = (f[0] / arr.vcpus[pools] + f[1] / arr.mem[pools]) / 2
        self.site[: self.n] = arr.site_idx[pools]
        self.spot[: self.n] = arr.cap_idx[pools] == SPOT

    def add(self, node: int) -> int:
        """A node just opened for this workload; its fit and score come with `refresh`."""
        j = self.n
        p = self.node_pool[node]
        self.node[j] = node
        self.site[j] = self.arr.site_idx[p]
        self.spot[j] = self.arr.cap_idx[p] == SPOT
        self.n += 1
        return j

    def refresh(self, j: int) -> None:
        node = self.node[j]
        p = self.node_pool[node]
        cpu, mem, gpus = self.free[0, node], self.free[1, node], self.free[2, node]
        self.fits[j] = cpu >= self.d[0] and mem >= self.d[1] and gpus >= self.d[2]
        self.score[j] = (cpu / self.arr.vcpus[p] + mem / self.arr.mem[p]) / 2
