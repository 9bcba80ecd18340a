"""Exact packing: every replica of an answer on a concrete node of its pool.

The model's capacity rule is aggregate per pool (the contract's rule); replica sizes fragment,
so the nodes a pool really needs can be more. This step, run on the final per-workload
placement, packs each pool's replicas onto whole nodes against the same per-node capacities
the model uses (bin_packing.py: first-fit decreasing everywhere, CP-SAT where FFD is not proven
minimal and time is left, pools ordered by what a node fewer would save). The node count of the
answer is the packing's. Where an owned pool (bounded `max_nodes`) then needs more nodes than it
has, the replicas on its least-filled nodes move to the workload's cheapest other candidate
pool that keeps its rules (same site for a spread workload, no new spot replicas) and is
unbounded.

Neither step can make a placement cheaper than the aggregate model allows, so the search's lower
bound stays valid; the answer's cost and gap are recomputed from the packed placement.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.answer.bin_packing import PoolPacking, cp_sat_size, improve, lower_bound, pack_pool, per_node
from broker.solver.answer.consolidate import Consolidator, Nodes
from broker.solver.prepare.classes import SPOT, WorkloadData
from broker.solver.types import Placement

NodeRows = list[list[tuple[int, int]]]  # per node: (workload index, replicas)


@dataclass(frozen=True)
class Capacities:
    """Per pool: one node's capacity in the model's terms, its bound, site, capacity kind and cost."""

    vcpus: FloatArray
    mem: FloatArray
    gpus: FloatArray
    max_nodes: FloatArray
    site: Sequence[int]
    kind: Sequence[int]
    node_cost: FloatArray
    # the tenant's family quotas (ModelInput's quota fields; empty: none)
    quota_of_pool: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    quota_node_vcpus: FloatArray = field(default_factory=lambda: np.zeros(0))
    quota_vcpus: FloatArray = field(default_factory=lambda: np.zeros(0))

    def quota_room(self, q: int, nodes: Mapping[int, Sequence[object]]) -> float:
        """New nodes of q that its family quota leaves room for beside `nodes` (pool -> its
        nodes); inf without a quota."""
        if len(self.quota_vcpus) == 0 or self.quota_of_pool[q] < 0:
            return math.inf
        g = int(self.quota_of_pool[q])
        used = sum(len(on) * float(self.quota_node_vcpus[p]) for p, on in nodes.items() if self.quota_of_pool[p] == g)
        return math.floor((float(self.quota_vcpus[g]) - used) / float(self.quota_node_vcpus[q]) + 1e-9)

    def of(self, p: int) -> FloatArray:
        return np.array([self.vcpus[p], self.mem[p], self.gpus[p]], dtype=np.float64)


@dataclass(frozen=True)
class PackingStats:
    pools: int
    proven: int  # pools whose node count no packing beats (lower bound met, or CP-SAT optimal)
    cp_sat_pools: int  # pools CP-SAT ran on
    cp_sat_better: int  # of those, where it used fewer nodes than FFD
    ffd_nodes: int  # nodes first-fit decreasing alone would have used
    nodes: int
    moved: int  # replicas moved off owned pools that could not hold them
    unmoved: int  # replicas still above an owned pool's nodes (no other home kept their rules)
    seconds: float
    consolidated: int = 0  # nodes emptied by moving their replicas to cheaper room at the site


@dataclass(frozen=True)
class PackedPlacement:
    x: Placement  # the placement after repair (equal to the input when nothing moved)
    nodes: dict[int, NodeRows]  # pool -> its nodes
    stats: PackingStats

    @property
    def counts(self) -> dict[int, int]:
        return {p: len(rows) for p, rows in self.nodes.items()}


def pack_placement(
    workloads: Sequence[WorkloadData],
    x: Placement,
    caps: Capacities,
    *,
    time_s: float,
    max_vars: int,
    seed: int = 0,
    consolidate_s: float = 0.0,
    pinned: frozenset[int] = frozenset(),
    per_pool_s: float | None = None,
) -> PackedPlacement:
    """Each pool of `x` packed; CP-SAT gets at most `time_s` in all, shared over the pools it
    may improve, owned pools over their bound first; then up to `consolidate_s` for emptying
    nodes whose replicas cost less elsewhere at the site (consolidate.py), never moving the
    workloads in `pinned` (replicas running now). With `per_pool_s` (work limits), CP-SAT gets
    that much deterministic time per pool instead, `time_s` and `consolidate_s` only guard."""
    started = time.perf_counter()
    x = {kp: r for kp, r in x.items() if r > 0}
    on = _by_pool(x)
    packed = {p: _pack(workloads, on[p], caps.of(p)) for p in sorted(on)}
    over = [p for p, pk in packed.items() if len(pk.nodes) > caps.max_nodes[p]]
    saving = sorted(
        (p for p, pk in packed.items() if not pk.proven and p not in over),
        key=lambda p: (-(len(packed[p].nodes) - packed[p].lower) * float(caps.node_cost[p]), p),
    )
    cp_ran = 0
    deadline = started + time_s
    queue = [p for p in over if not packed[p].proven] + saving
    for i, p in enumerate(queue):
        items = on[p]
        left = deadline - time.perf_counter()
        share = left / (len(queue) - i) if per_pool_s is None else per_pool_s
        if share < 0.02 or cp_sat_size(len(items), len(packed[p].nodes)) > max_vars:
            continue
        cp_ran += 1
        counts, sizes, cap, limits = _instance(workloads, items, caps.of(p))
        wall = None if per_pool_s is None else max(left, 2.0 * per_pool_s)
        packed[p] = improve(packed[p], counts, sizes, cap, time_s=share, seed=seed, limits=limits, wall_s=wall)
    cp_better = sum(pk.engine == "cp-sat" and len(pk.nodes) < pk.ffd_nodes for pk in packed.values())
    moved, unmoved = _repair(workloads, x, on, packed, caps)
    if moved:
        on = _by_pool(x)
    consolidated = 0
    if consolidate_s > 0:
        consolidated = _consolidate(workloads, x, on, packed, caps, pinned, time.perf_counter() + consolidate_s)
        if consolidated:
            on = _by_pool(x)
    rows: dict[int, NodeRows] = {}
    for p, pk in packed.items():
        if pk.nodes:
            items = on[p]
            rows[p] = [[(items[i][0], n) for i, n in node] for node in pk.nodes]
    stats = PackingStats(
        pools=len(rows),
        proven=sum(pk.proven for pk in packed.values() if pk.nodes),
        cp_sat_pools=cp_ran,
        cp_sat_better=cp_better,
        ffd_nodes=sum(pk.ffd_nodes for pk in packed.values() if pk.nodes),
        nodes=sum(len(r) for r in rows.values()),
        moved=moved,
        unmoved=unmoved,
        seconds=time.perf_counter() - started,
        consolidated=consolidated,
    )
    return PackedPlacement(x, rows, stats)


def _by_pool(x: Placement) -> dict[int, list[tuple[int, int]]]:
    """Per pool, (workload index, replicas) by workload: the items of its packing, in a fixed order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for (k, p), r in sorted(x.items()):
        if r > 0:
            out.setdefault(p, []).append((k, r))
    return out


def _items_on(x: Placement, p: int) -> list[tuple[int, int]]:
    return sorted((k, r) for (k, q), r in x.items() if q == p and r > 0)


def _instance(
    workloads: Sequence[WorkloadData], items: list[tuple[int, int]], cap: FloatArray
) -> tuple[list[int], FloatArray, FloatArray, list[int | None]]:
    """One pool's bin-packing instance: counts, sizes, a node's capacity, per-node limits."""
    sizes = np.array([[workloads[k].w.cpu, workloads[k].w.memory_gib, workloads[k].w.gpus] for k, _ in items])
    limits = [workloads[k].w.max_per_node for k, _ in items]
    return [r for _, r in items], sizes.reshape(len(items), 3), cap, limits


def _pack(workloads: Sequence[WorkloadData], items: list[tuple[int, int]], cap: FloatArray) -> PoolPacking:
    if not items:
        return PoolPacking([], "ffd", True, 0, 0)
    return pack_pool(*_instance(workloads, items, cap))


def _repair(
    workloads: Sequence[WorkloadData],
    x: Placement,
    on: dict[int, list[tuple[int, int]]],
    packed: dict[int, PoolPacking],
    caps: Capacities,
) -> tuple[int, int]:
    """Owned pools packed onto more nodes than they have: the replicas of their least-filled
    nodes move to another home of their workload (in place, on x and packed); replicas moved and
    replicas no home could take."""
    moved = unmoved = 0
    for p in sorted(packed):
        bound = caps.max_nodes[p]
        if not math.isfinite(bound) or len(packed[p].nodes) <= bound:
            continue
        items = on[p]
        cap = caps.of(p)
        sizes = _instance(workloads, items, cap)[1]
        share = (sizes / np.where(cap > 0, cap, 1.0)).max(axis=1)
        fill = [sum(n * float(share[i]) for i, n in node) for node in packed[p].nodes]
        order = sorted(range(len(fill)), key=lambda b: (-fill[b], b))
        keep = [packed[p].nodes[b] for b in order[: int(bound)]]
        stuck: NodeRows = []
        touched: set[int] = set()
        for b in order[int(bound) :]:
            left: list[tuple[int, int]] = []
            for i, n in packed[p].nodes[b]:
                k = items[i][0]
                q = _other_home(workloads[k], p, caps)
                if q is None:
                    left.append((i, n))
                    unmoved += n
                    continue
                x[(k, p)] -= n
                x[(k, q)] = x.get((k, q), 0) + n
                moved += n
                touched.add(q)
            if left:
                stuck.append(left)
        # the kept nodes hold what stayed; item indices follow the pool's new item list
        still = _items_on(x, p)
        index = {k: j for j, (k, _) in enumerate(still)}
        renumber = [[(index[items[i][0]], n) for i, n in node] for node in keep + stuck]
        pk = packed[p]
        # FFD vs CP-SAT is compared before the repair; after it the pool runs its kept nodes
        packed[p] = PoolPacking(renumber, pk.engine, pk.proven and not stuck, pk.lower, len(renumber))
        for q in touched:
            packed[q] = _pack(workloads, _items_on(x, q), caps.of(q))
    for kp in [kp for kp, r in x.items() if r <= 0]:
        del x[kp]
    return moved, unmoved


def _consolidate(
    workloads: Sequence[WorkloadData],
    x: Placement,
    on: dict[int, list[tuple[int, int]]],
    packed: dict[int, PoolPacking],
    caps: Capacities,
    pinned: frozenset[int],
    deadline: float,
) -> int:
    """Nodes emptied by consolidation; x and the touched pools' packings updated in place."""
    nodes = Nodes({p: [{on[p][i][0]: n for i, n in node} for node in pk.nodes] for p, pk in packed.items()})
    emptied = Consolidator(workloads, caps, nodes, set(pinned)).run(deadline)
    for kp in [kp for kp in x if kp[1] in nodes.touched]:  # one pass over x, not one per pool
        del x[kp]
    for p in nodes.touched:
        rows = [row for row in nodes.of[p] if row]
        totals: dict[int, int] = {}
        for row in rows:
            for k, n in row.items():
                totals[k] = totals.get(k, 0) + n
        x.update({(k, p): n for k, n in totals.items()})
        items = sorted(totals.items())
        index = {k: j for j, (k, _) in enumerate(items)}
        renumbered = [sorted((index[k], n) for k, n in row.items()) for row in rows]
        old = packed.get(p)
        lower = lower_bound(*_instance(workloads, items, caps.of(p))) if items else 0
        packed[p] = PoolPacking(
            renumbered,
            old.engine if old else "ffd",
            len(renumbered) <= lower,
            lower,
            old.ffd_nodes if old else len(renumbered),
        )
    return emptied


def _other_home(wd: WorkloadData, p: int, caps: Capacities) -> int | None:
    """The cheapest unbounded candidate pool of the workload other than p, per replica (its
    share of a node plus its site cost), that keeps its rules: the same site when it spreads,
    spot only when p is spot (its spot cap then still holds)."""
    w = wd.w
    size = np.array([w.cpu, w.memory_gib, w.gpus])
    best: tuple[float, int] | None = None
    for j, q in enumerate(wd.cand.tolist()):
        if q == p or math.isfinite(caps.max_nodes[q]):
            continue
        if w.min_sites > 1 and caps.site[q] != caps.site[p]:
            continue
        if caps.kind[q] == SPOT and caps.kind[p] != SPOT:
            continue
        fit = min(per_node(size, caps.of(q)), w.max_per_node or 1 << 30)
        if fit < 1:
            continue
        cost = float(caps.node_cost[q]) / fit + float(wd.rep_cost[j])
        if best is None or (cost, q) < best:
            best = (cost, q)
    return None if best is None else best[1]
