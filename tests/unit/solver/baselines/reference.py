"""The baselines as they were written before they were made cheaper (greedy.py, kubernetes.py,
home.py at 2026-12-04): the plain per-workload versions, kept to check that the optimised ones
place exactly as they did (test_equivalence.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.baselines.home import ONDEMAND
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.classes import SPOT, WorkloadData, per_node_exact, spot_cap
from broker.solver.segments import cheapest_per_site, group_bounds
from broker.solver.types import Placement


def _per_node(wd: WorkloadData, vcpus: FloatArray, mem: FloatArray, gpus: FloatArray) -> FloatArray:
    w, cand = wd.w, wd.cand
    exact = per_node_exact(w.cpu, w.memory_gib, w.gpus, vcpus[cand], mem[cand], gpus[cand])
    return np.maximum(np.floor(exact + 1e-9), 1.0)


@dataclass(frozen=True)
class _Shape:
    """What a workload's size makes of its candidate pools, shared by workloads of one shape and
    candidate set: replicas per node and the candidates grouped by site."""

    per_node: FloatArray
    by_site: IntArray  # positions into cand, grouped by site, ascending within a site
    bounds: IntArray  # site group g is by_site[bounds[g] : bounds[g + 1]]


def _shape(wd: WorkloadData, arr: PoolArrays) -> _Shape:
    per_node = _per_node(wd, arr.vcpus, arr.mem, arr.gpus)
    by_site = np.argsort(arr.site_idx[wd.cand], kind="stable")
    site_of = arr.site_idx[wd.cand[by_site]]
    return _Shape(per_node, by_site, group_bounds(site_of))


def greedy_cheapest_fit(
    workloads: Sequence[WorkloadData],
    arr: PoolArrays,
) -> Placement | None:
    """Returns (workload index, pool index) -> replicas, or None when greedy fails."""
    max_nodes, site_idx, cap_idx = arr.max_nodes, arr.site_idx, arr.cap_idx
    used_nodes: dict[int, int] = {}
    out: Placement = {}
    memo: dict[tuple[object, ...], list[tuple[int, int]]] = {}
    shapes: dict[tuple[object, ...], _Shape] = {}
    costs: dict[tuple[object, ...], tuple[FloatArray, list[int]]] = {}
    for k, wd in enumerate(workloads):
        w = wd.w
        key = (wd.signature, w.cpu, w.memory_gib, w.gpus, w.storage_gib, w.storage_tier, w.min_sites,
               w.replicas, w.max_spot_fraction)  # fmt: skip
        if key in memo:
            for p, r in memo[key]:
                out[(k, p)] = r
            continue
        cand = wd.cand
        if len(cand) == 0:
            return None
        shape_key = (wd.signature, w.cpu, w.memory_gib, w.gpus)
        if shape_key not in shapes:
            shapes[shape_key] = _shape(wd, arr)
        shape = shapes[shape_key]
        per_node = shape.per_node
        # rep_cost follows from the signature and storage, as for `memo`; whole nodes for the
        # replicas a site holds
        here = -(-w.replicas // w.min_sites)
        cost_key = (*shape_key, w.storage_gib, w.storage_tier, here)
        if cost_key not in costs:
            cost = arr.node_cost[cand] * np.ceil(here / per_node) / here + wd.rep_cost
            # sites cheapest first, and within a site its pools cheapest first (ties by position):
            # the order a stable argsort of all candidates gives, sorting only the sites visited
            costs[cost_key] = (cost, cheapest_per_site(cost, shape.by_site, shape.bounds)[0].tolist())
        cost_per_replica, groups = costs[cost_key]
        if len(groups) < w.min_sites:
            return None
        cap = spot_cap(w)
        spot_left = cap if cap is not None else w.replicas
        n_spread = w.min_sites
        quota = [w.replicas // n_spread + (1 if i < w.replicas % n_spread else 0) for i in range(n_spread)]
        carry = 0
        mine: dict[int, int] = {}
        touched_bounded = False
        for pos, g in enumerate(groups):
            need = (quota[pos] if pos < n_spread else 0) + carry
            at = shape.by_site[shape.bounds[g] : shape.bounds[g + 1]]
            at = at[np.argsort(cost_per_replica[at], kind="stable")]
            for i in at:
                if need <= 0:
                    break
                p = int(cand[i])
                if cap_idx[p] == SPOT and spot_left <= 0:
                    continue
                fit = int(per_node[i])
                free_nodes = max_nodes[p] - used_nodes.get(p, 0)
                take = int(min(need, free_nodes * fit))
                if cap_idx[p] == SPOT:
                    take = min(take, spot_left)
                    spot_left -= take
                if take <= 0:
                    continue
                touched_bounded |= bool(np.isfinite(max_nodes[p]))
                used_nodes[p] = used_nodes.get(p, 0) + math.ceil(take / fit)
                mine[p] = mine.get(p, 0) + take
                need -= take
            carry = need
            if pos >= n_spread - 1 and carry == 0:
                break
        if len({int(site_idx[p]) for p in mine}) < w.min_sites or sum(mine.values()) != w.replicas:
            return None
        for p, r in mine.items():
            out[(k, p)] = r
        if not touched_bounded:
            memo[key] = list(mine.items())
    return out


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


def _home_per_replica(wd: WorkloadData, pools: IntArray, arr: PoolArrays) -> FloatArray:
    """USD/h per replica on each of `pools` when a node holds as many replicas as fit."""
    w = wd.w
    exact = per_node_exact(w.cpu, w.memory_gib, w.gpus, arr.vcpus[pools], arr.mem[pools], arr.gpus[pools])
    return np.asarray(arr.node_cost[pools] / np.maximum(np.floor(exact + 1e-9), 1.0), dtype=np.float64)


def _home_candidates(wd: WorkloadData, arr: PoolArrays) -> tuple[IntArray, FloatArray]:
    """The workload's on-demand candidates (all its candidates when it may use none on demand)
    and the per-replica cost on each (its site's storage and latency terms included)."""
    at = np.flatnonzero(arr.cap_idx[wd.cand] == ONDEMAND)
    if len(at) == 0:
        at = np.arange(len(wd.cand))
    pools = wd.cand[at]
    return at, _home_per_replica(wd, pools, arr) + wd.rep_cost[at]


def home_workloads(
    workloads: Sequence[WorkloadData], arr: PoolArrays, site_provider: Sequence[str]
) -> list[WorkloadData]:
    """Each workload with its candidates cut to the home cloud's node groups (see the module)."""
    n_sites = len(site_provider)
    cores = np.zeros(n_sites)
    cost = np.zeros(n_sites)
    keys: list[tuple[object, ...]] = []
    memo: dict[tuple[object, ...], tuple[IntArray, FloatArray]] = {}
    for wd in workloads:
        w = wd.w
        key: tuple[object, ...] = (wd.signature, w.cpu, w.memory_gib, w.gpus, w.storage_gib, w.storage_tier)
        if key not in memo:
            at, rep = _home_candidates(wd, arr)
            best = np.full(n_sites, np.inf)
            np.minimum.at(best, arr.site_idx[wd.cand[at]], rep)
            memo[key] = (at, best)
        best = memo[key][1]
        allowed = np.isfinite(best)
        cores[allowed] += w.replicas * w.cpu
        cost[allowed] += w.replicas * best[allowed]
        keys.append(key)
    if not workloads:
        return []
    home = int(np.lexsort((np.arange(n_sites), cost, -cores))[0])
    home_provider = site_provider[home]
    rank = np.array([1 if p == home_provider else 2 for p in site_provider])
    rank[home] = 0
    out: list[WorkloadData] = []
    cut: dict[tuple[object, ...], tuple[IntArray, tuple[object, ...]]] = {}
    for wd, key in zip(workloads, keys, strict=True):
        spread = max(1, wd.w.min_sites)
        if (key, spread) not in cut:
            at, best = memo[key]
            allowed = np.flatnonzero(np.isfinite(best))
            sites = allowed[np.lexsort((allowed, best[allowed], rank[allowed]))][:spread]
            keep = at[np.isin(arr.site_idx[wd.cand[at]], sites)]
            # the signature names the candidate set, as kubernetes.py's caches need
            cut[(key, spread)] = (keep, (wd.signature, "home", *sites.tolist()))
        keep, sig = cut[(key, spread)]
        out.append(replace(wd, cand=wd.cand[keep], rep_cost=wd.rep_cost[keep], signature=sig))
    return out
