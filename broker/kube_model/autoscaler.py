"""cluster-autoscaler: which node group grows (the price expander), by how many nodes (the
binpacking estimator, first-fit-decreasing), and which nodes go (scale-down, its defaults).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.kube_model.scheduler import EPS


def by_price(node_price: FloatArray) -> IntArray:
    """The node groups in the price expander's order: cheapest node first, ties by position."""
    return np.argsort(node_price, kind="stable")


def cheapest_node_group(price_order: Iterable[int], may_open: Callable[[int], bool]) -> int:
    """The price expander: the first node group in `price_order` (by_price) that may open a node
    for the pending pod (it fits, it is under its maximum, the pod's spread allows its site); -1
    when none may."""
    for g in price_order:
        if may_open(g):
            return g
    return -1


def first_fit_decreasing(
    sizes: FloatArray, capacity: FloatArray, groups: IntArray | None = None, limit: IntArray | None = None
) -> tuple[IntArray, int]:
    """The binpacking estimator: pack pending pods (rows of `sizes`, [pod, 3]) onto new nodes of
    one group, of `capacity` [3], largest first: (node of each pod, nodes needed); a pod larger
    than a node gets -1. With `groups` (per pod, its workload) and `limit` (per workload), a node
    holds at most `limit` pods of a group."""
    order = np.argsort(-(sizes[:, 0] / max(capacity[0], EPS) + sizes[:, 1] / max(capacity[1], EPS)), kind="stable")
    bins = np.zeros((0, 3))
    out = np.full(len(sizes), -1, dtype=np.int64)
    in_bin: dict[tuple[int, int], int] = {}  # (group, bin) -> items
    for i in order.tolist():
        s = sizes[i]
        if (s > capacity + EPS).any():
            continue
        room = (bins + s <= capacity + EPS).all(axis=1) if len(bins) else np.zeros(0, dtype=bool)
        if groups is not None and limit is not None:
            g = int(groups[i])
            for b in np.flatnonzero(room).tolist():
                room[b] = in_bin.get((g, b), 0) < limit[g]
        hit = np.flatnonzero(room)
        if len(hit):
            b = int(hit[0])
        else:
            bins = np.vstack([bins, np.zeros(3)])
            b = len(bins) - 1
        bins[b] += s
        out[i] = b
        if groups is not None:
            key = (int(groups[i]), b)
            in_bin[key] = in_bin.get(key, 0) + 1
    return out, len(bins)


def utilisation(held: FloatArray, capacity: FloatArray) -> FloatArray:
    """Scale-down's node utilisation: [node] the larger of the requested cpu and memory shares
    (`held` and `capacity` [2+, node]; GPUs are not counted)."""
    return np.asarray(np.max(held[:2] / capacity[:2], axis=0), dtype=np.float64)


@dataclass
class ScaleDown:
    """cluster-autoscaler's scale-down, its defaults: a node whose utilisation is under
    `utilization` (empty nodes too) for `unneeded_s`, whose pods all fit elsewhere, is drained
    and removed; empty nodes in bulk, at most one non-empty node per loop; none within
    `delay_after_add_s` of a scale-up. It remembers since when each node has been unneeded."""

    utilization: float = 0.5
    unneeded_s: float = 600.0
    delay_after_add_s: float = 600.0
    unneeded_since: dict[int, float] = field(default_factory=dict)
    last_scale_up_s: float = -np.inf

    def scaled_up(self, now_s: float) -> None:
        self.last_scale_up_s = now_s

    def due(self, nodes: IntArray, use: FloatArray, now_s: float) -> list[int]:
        """Of the live `nodes` (ascending) at utilisation `use` (same order), those to remove now,
        least used first (ties by node); the unneeded clock of each node is kept up to date."""
        unneeded = use < self.utilization
        for node in nodes[~unneeded].tolist():
            self.unneeded_since.pop(node, None)
        for node in nodes[unneeded].tolist():
            self.unneeded_since.setdefault(node, now_s)
        if now_s < self.last_scale_up_s + self.delay_after_add_s:
            return []
        due = [x for x in nodes[unneeded].tolist() if now_s - self.unneeded_since[x] >= self.unneeded_s]
        return sorted(due, key=lambda x: (use[np.searchsorted(nodes, x)], x))

    def remove(
        self, due: Iterable[int], *, empty: Callable[[int], bool], drain: Callable[[int], None],
        move_off: Callable[[int], bool],
    ) -> None:  # fmt: skip
        """Remove the `due` nodes in order: `drain` an empty one at once; a node with pods only if
        `move_off` finds all of them room elsewhere (and moves them), one such node per loop."""
        moved_one = False
        for node in due:
            if empty(node):
                drain(node)
                self.unneeded_since.pop(node, None)
                continue
            if moved_one:
                continue
            if move_off(node):
                drain(node)
                self.unneeded_since.pop(node, None)
                moved_one = True
