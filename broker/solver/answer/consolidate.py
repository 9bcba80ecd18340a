"""Node consolidation after packing: empty the least-filled nodes where their replicas are
cheaper elsewhere at the same site.

The model's capacity rule is aggregate, so its answer often fills a pool to the last vCPU: the
pool's replicas then need one node more than the model counted, and that node (sometimes a
96-vCPU one) holds a sliver. This step takes, pool by pool, the least-filled node and re-homes
its replicas: first into room left on nodes already running at the same site (any pool there
the workload may use, the same pool first), then the rest onto new nodes of the cheapest pool
there that every one of them may use. The node goes when that costs less than it does.

Only the pool changes, never the site, so a workload's egress, latency, residency and spread over
sites stay as they were; a spot replica may leave spot but none becomes one (spot caps hold); a
workload with replicas running now is not moved (its migration cost and move cap stay the
search's); per-node limits (`spread.max_per_node`), owned pools' node bounds and every node's
capacity hold. The search's lower bound is untouched: this only picks among packed placements.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.answer.bin_packing import first_fit_decreasing
from broker.solver.prepare.classes import SPOT, WorkloadData

Node = dict[int, int]  # workload index -> replicas on the node
_EPS = 1e-9
_SAVES = 1e-7  # relative: a move must save more than rounding


@dataclass
class Nodes:
    """Every pool's nodes with what each holds, and their loads (nodes x cpu, memory, GPUs)."""

    of: dict[int, list[Node]]
    load: dict[int, FloatArray] = field(default_factory=dict)
    touched: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class _Plan:
    delta: float  # objective change (< 0: saves)
    into: list[tuple[int, int, int, int]]  # (workload, pool, node, replicas) onto running nodes
    new_pool: int  # -1: no new nodes
    new_nodes: list[Node]


class CapacityView(Protocol):
    """What consolidation reads of the pools (packing.Capacities has it)."""

    @property
    def site(self) -> Sequence[int]: ...
    @property
    def kind(self) -> Sequence[int]: ...
    @property
    def node_cost(self) -> FloatArray: ...
    @property
    def max_nodes(self) -> FloatArray: ...
    @property
    def vcpus(self) -> FloatArray: ...
    @property
    def mem(self) -> FloatArray: ...
    @property
    def gpus(self) -> FloatArray: ...
    def of(self, p: int) -> FloatArray: ...
    def quota_room(self, q: int, nodes: Mapping[int, Sequence[object]]) -> float: ...


class Consolidator:
    def __init__(self, workloads: Sequence[WorkloadData], caps: CapacityView, nodes: Nodes, pinned: set[int]) -> None:
        self.w = workloads
        self.caps = caps
        self.nodes = nodes
        self.pinned = pinned
        self.size = np.array([[wd.w.cpu, wd.w.memory_gib, wd.w.gpus] for wd in workloads], dtype=np.float64)
        self.cap = {p: caps.of(p) for p in nodes.of}
        self.site_of = np.asarray(caps.site, dtype=np.int64)
        self.at_site: dict[int, list[int]] = {}
        sites: dict[int, set[int]] = {}  # per workload, the sites it runs at (moves keep them)
        for p in sorted(nodes.of):
            self.at_site.setdefault(caps.site[p], []).append(p)
            nodes.load[p] = self._loads(nodes.of[p])
            for row in nodes.of[p]:
                for k in row:
                    sites.setdefault(k, set()).add(caps.site[p])
        # per workload, its candidate pools at those sites with its cost per replica there
        self.rep: dict[int, dict[int, float]] = {}
        for k, at in sites.items():
            cand, rep_cost = workloads[k].cand, workloads[k].rep_cost
            here = np.isin(self.site_of[cand], list(at))
            self.rep[k] = dict(zip(cand[here].tolist(), rep_cost[here].tolist(), strict=True))

    def _loads(self, rows: list[Node]) -> FloatArray:
        out = np.zeros((len(rows), 3))
        for b, row in enumerate(rows):
            for k, n in row.items():
                out[b] += n * self.size[k]
        return out

    def _cap(self, q: int) -> FloatArray:
        if q not in self.cap:
            self.cap[q] = self.caps.of(q)
        return self.cap[q]

    def _may_use(self, k: int, p: int, q: int) -> bool:
        """Workload k, now on p, may run on q: a candidate of it, no new spot replica."""
        return q in self.rep[k] and (self.caps.kind[q] != SPOT or self.caps.kind[p] == SPOT)

    def run(self, deadline: float, passes: int = 4, tries: int = 3) -> int:
        """Nodes emptied, pass after pass until none goes or the time is up; per pool, its
        `tries` least-filled nodes are tried in turn until one goes (then again)."""
        emptied = 0
        for _ in range(passes):
            gone = 0
            for p in sorted(self.nodes.of, key=lambda p: (-float(self.caps.node_cost[p]), p)):
                while self.nodes.of[p]:
                    if time.perf_counter() > deadline:
                        return emptied + gone
                    if not self._empty_one(p, tries):
                        break
                    gone += 1
            emptied += gone
            if not gone:
                break
        return emptied

    def _empty_one(self, p: int, tries: int) -> bool:
        """Empty one of p's `tries` least-filled nodes, the first whose replicas cost less elsewhere."""
        cap = self.cap[p]
        used = cap > 0
        fill = (self.nodes.load[p][:, used] / cap[used]).max(axis=1, initial=0.0)
        for b in np.argsort(fill, kind="stable")[:tries].tolist():
            plan = self._plan(p, b)
            if plan is not None and plan.delta < -_SAVES * max(float(self.caps.node_cost[p]), 1e-12):
                self._apply(p, b, plan)
                return True
        return False

    def _plan(self, p: int, b: int) -> _Plan | None:
        """Where node b of pool p's replicas would go, and what that changes; None: nowhere."""
        row = self.nodes.of[p][b]
        if any(k in self.pinned for k in row):
            return None
        site = self.caps.site[p]
        delta = -float(self.caps.node_cost[p])
        extra: dict[int, FloatArray] = {}  # per pool, the load this plan adds to its running nodes
        added: dict[tuple[int, int], IntArray] = {}  # per (workload, pool), replicas added per node
        into: list[tuple[int, int, int, int]] = []
        rest: Node = {}
        share = (self.size[list(row)] / np.where(self.cap[p] > 0, self.cap[p], np.inf)).max(axis=1)
        for k in [k for _, k in sorted(zip((-share).tolist(), row, strict=True))]:
            left = row[k]
            size = self.size[k]
            limit = self.w[k].w.max_per_node
            for q in self._homes(k, p, site):
                load = self.nodes.load[q] + extra[q] if q in extra else self.nodes.load[q]
                room = _room(self.cap[q][None, :] - load, size)
                if q == p:
                    room[b] = 0
                if limit is not None:
                    have = np.array([r.get(k, 0) for r in self.nodes.of[q]]) + added.get((k, q), 0)
                    room = np.minimum(room, np.maximum(limit - have, 0))
                before = np.cumsum(room) - room
                take = np.minimum(np.maximum(left - before, 0), room)
                hit = np.flatnonzero(take)
                if not len(hit):
                    continue
                extra[q] = extra.get(q, np.zeros_like(self.nodes.load[q])) + np.outer(take, size)
                added[(k, q)] = added.get((k, q), 0) + take
                into += [(k, q, int(c), int(take[c])) for c in hit]
                moved = int(take.sum())
                delta += moved * (self.rep[k][q] - self.rep[k][p])
                left -= moved
                if left == 0:
                    break
            if left:
                rest[k] = left
        if not rest:
            return _Plan(delta, into, -1, [])
        best: tuple[float, int, list[Node]] | None = None
        pools, floor, site_cost = self._new_homes(rest, p, site)
        for i in np.argsort(floor, kind="stable").tolist():
            # pools in order of the least their new nodes can cost: stop once that cannot save
            if floor[i] >= (-delta if best is None else best[0]):
                break
            q = int(pools[i])
            packed = self._pack(rest, q)
            if packed is None:
                continue
            cost = len(packed) * float(self.caps.node_cost[q]) + float(site_cost[i])
            if best is None or cost < best[0]:
                best = (cost, q, packed)
        if best is None:
            return None
        return _Plan(delta + best[0], into, best[1], best[2])

    def _homes(self, k: int, p: int, site: int) -> list[int]:
        """Pools with running nodes at the site that k may use: its own first, then by its cost there."""
        others = [q for q in self.at_site[site] if q != p and self.nodes.of.get(q) and self._may_use(k, p, q)]
        return [p, *sorted(others, key=lambda q: (self.rep[k][q], q))]

    def _new_homes(self, rest: Node, p: int, site: int) -> tuple[IntArray, FloatArray, FloatArray]:
        """Pools at the site every replica left over may use (the workloads' candidates there),
        the least their new nodes can cost (nodes by the aggregate rule, at least one, plus the
        replicas' site costs there) and those site costs against p's."""
        pools: set[int] | None = None
        for k in rest:
            here = {q for q in self.rep[k] if self.caps.site[q] == site and self._may_use(k, p, q)}
            pools = here if pools is None else pools & here
        qs = np.array(sorted(pools or ()), dtype=np.int64)
        ks = list(rest)
        n = np.array([rest[k] for k in ks], dtype=np.float64)
        total = n @ self.size[ks]
        caps = np.stack([self.caps.vcpus[qs], self.caps.mem[qs], self.caps.gpus[qs]], axis=1)
        need = total > 0
        fits = ((self.size[ks][None, :, :] <= caps[:, None, :] + _EPS) | (self.size[ks][None, :, :] <= 0)).all(
            axis=(1, 2)
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            nodes = np.where(caps[:, need] > 0, total[need] / caps[:, need], np.inf).max(axis=1, initial=0.0)
        nodes = np.maximum(np.ceil(nodes - 1e-9), 1.0)
        site_cost = np.array([sum(rest[k] * (self.rep[k][int(q)] - self.rep[k][p]) for k in ks) for q in qs])
        floor = np.where(fits, nodes * self.caps.node_cost[qs] + site_cost, np.inf)
        keep = np.isfinite(floor)
        return qs[keep], floor[keep], site_cost[keep].reshape(-1)

    def _pack(self, rest: Node, q: int) -> list[Node] | None:
        """rest on new nodes of q (first-fit decreasing), or None when q cannot take them."""
        ks = sorted(rest)
        sizes = self.size[ks]
        cap = self._cap(q)
        if ((sizes > cap + _EPS) & (sizes > 0)).any():
            return None
        rows = first_fit_decreasing([rest[k] for k in ks], sizes, cap, [self.w[k].w.max_per_node for k in ks])
        if len(self.nodes.of.get(q, ())) + len(rows) > self.caps.max_nodes[q]:
            return None
        if len(rows) > self.caps.quota_room(q, self.nodes.of):
            return None  # the tenant's family quota has no room for them
        return [{ks[i]: n for i, n in row} for row in rows]

    def _apply(self, p: int, b: int, plan: _Plan) -> None:
        nodes = self.nodes
        for k, q, c, n in plan.into:
            nodes.of[q][c][k] = nodes.of[q][c].get(k, 0) + n
            nodes.load[q][c] += n * self.size[k]
            nodes.touched.add(q)
        if plan.new_pool >= 0:
            q = plan.new_pool
            if q not in nodes.of:
                nodes.of[q] = []
                nodes.load[q] = np.zeros((0, 3))
                self.at_site[self.caps.site[q]].append(q)
            nodes.of[q] += plan.new_nodes
            nodes.load[q] = np.vstack([nodes.load[q], self._loads(plan.new_nodes)])
            nodes.touched.add(q)
        del nodes.of[p][b]
        nodes.load[p] = np.delete(nodes.load[p], b, axis=0)
        nodes.touched.add(p)


def _room(free: FloatArray, size: FloatArray) -> IntArray:
    """Per node, replicas of `size` that fit in its `free` capacity (dimensions the replica does
    not use ignored)."""
    used = size > 0
    if not used.any():
        return np.full(len(free), 1 << 30, dtype=np.int64)
    room = np.floor(((free[:, used] + _EPS) / size[used]).min(axis=1))
    out: IntArray = np.maximum(room, 0).astype(np.int64)
    return out
