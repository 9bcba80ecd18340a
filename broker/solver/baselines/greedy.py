"""Greedy cheapest fit (SkyPilot-style), a baseline implemented in the project.

Each workload on its own, no node sharing between workloads: at each site, the pool that hosts
the replicas the workload puts there at the lowest cost (whole nodes: a 2-replica workload does
not pick a 96-vCPU node for its price per replica when full), spread round-robin over the
cheapest `min_sites` sites. It keeps every hard constraint the solver keeps (filters, spread, spot caps,
owned capacity), so the comparison is fair; its placement is also one of the search's starts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from broker.core.domain import Workload
from broker.core.pooltable import FloatArray, IntArray
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.classes import SPOT, WorkloadData, per_node_exact, spot_cap
from broker.solver.segments import cheapest_per_site, group_bounds
from broker.solver.types import Placement


@dataclass(frozen=True)
class _Shape:
    """What a workload's size makes of its candidate pools, shared by workloads of one shape and
    candidate set: replicas per node and the candidates grouped by site."""

    per_node: FloatArray
    by_site: IntArray  # positions into cand, grouped by site, ascending within a site
    bounds: IntArray  # site group g is by_site[bounds[g] : bounds[g + 1]]


#: Sizes whose replicas per node are kept for every pool (two arrays of the catalog's length each):
#: an estate has a few dozen; a request sized from forecasts may have one per workload.
_MAX_SIZES = 64


class _Shapes:
    """_Shape per (candidate set, size). A size met on a second candidate set has its replicas per
    node computed over every pool (an estate has a few dozen sizes and
    hundreds of candidate sets, of thousands of pools each), read at each set's candidates; the
    grouping by site is computed once per set. Element-wise: the same values either way."""

    def __init__(self, arr: PoolArrays) -> None:
        self.arr = arr
        # small site numbers: a stable argsort of them is a radix sort
        small = len(arr.site_idx) and arr.site_idx.max() < 2**15
        self.site_key = arr.site_idx.astype(np.int16) if small else arr.site_idx
        self.sizes: dict[tuple[float, float, float], FloatArray] = {}
        self.met: set[tuple[float, float, float]] = set()
        self.groups: dict[tuple[object, ...], tuple[IntArray, IntArray]] = {}
        self.shapes: dict[tuple[object, ...], _Shape] = {}

    def get(self, wd: WorkloadData) -> _Shape:
        w = wd.w
        key = (wd.signature, w.cpu, w.memory_gib, w.gpus)
        shape = self.shapes.get(key)
        if shape is None:
            size = (w.cpu, w.memory_gib, w.gpus)
            if size not in self.sizes and size in self.met and len(self.sizes) < _MAX_SIZES:
                self.sizes[size] = self._per_node(w, slice(None))
            self.met.add(size)
            per_node = self.sizes[size][wd.cand] if size in self.sizes else self._per_node(w, wd.cand)
            if wd.signature not in self.groups:
                by_site = np.argsort(self.site_key[wd.cand], kind="stable")
                self.groups[wd.signature] = (by_site, group_bounds(self.arr.site_idx[wd.cand[by_site]]))
            shape = self.shapes[key] = _Shape(per_node, *self.groups[wd.signature])
        return shape

    def _per_node(self, w: Workload, pools: IntArray | slice) -> FloatArray:
        """Replicas per node on `pools`."""
        arr = self.arr
        exact = per_node_exact(w.cpu, w.memory_gib, w.gpus, arr.vcpus[pools], arr.mem[pools], arr.gpus[pools])
        return np.maximum(np.floor(exact + 1e-9), 1.0)


def greedy_cheapest_fit(
    workloads: Sequence[WorkloadData],
    arr: PoolArrays,
) -> Placement | None:
    """Returns (workload index, pool index) -> replicas, or None when greedy fails."""
    max_nodes, site_idx, cap_idx = arr.max_nodes, arr.site_idx, arr.cap_idx
    used_nodes: dict[int, int] = {}
    out: Placement = {}
    memo: dict[tuple[object, ...], list[tuple[int, int]]] = {}
    shapes = _Shapes(arr)
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
        shape = shapes.get(wd)
        per_node = shape.per_node
        # rep_cost follows from the signature and storage, as for `memo`; a site holds at most
        # `here` of the workload's replicas, on whole nodes
        here = -(-w.replicas // w.min_sites)
        cost_key = (wd.signature, w.cpu, w.memory_gib, w.gpus, w.storage_gib, w.storage_tier, here)
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


def unshared_nodes(
    workloads: Sequence[WorkloadData], placement: Placement, *, vcpus: FloatArray, mem: FloatArray, gpus: FloatArray
) -> dict[int, int]:
    """Nodes per pool when each workload gets its own nodes (no sharing)."""
    out: dict[int, int] = {}
    for (k, p), r in placement.items():
        w = workloads[k].w
        fit = min(
            math.floor(vcpus[p] / w.cpu + 1e-9),
            math.floor(mem[p] / w.memory_gib + 1e-9),
            math.floor(gpus[p] / w.gpus + 1e-9) if w.gpus > 0 else 10**9,
        )
        out[p] = out.get(p, 0) + math.ceil(r / max(fit, 1))
    return out
