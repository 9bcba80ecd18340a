"""Per-node limits on one workload's replicas (`spread.max_per_node`, and the broker policy's
`burst_spread`), kept while binding, moving and packing replicas one at a time."""

from __future__ import annotations

from collections import Counter

import numpy as np

from broker.core.pooltable import BoolArray, IntArray
from broker.simulate.cluster import Cluster

NO_LIMIT = 1 << 30


class PerNode:
    """How many replicas of each workload each node holds (bound there or moving there), and
    how many it may: `limit` per workload."""

    def __init__(self, c: Cluster, limit: IntArray) -> None:
        self.limit = limit
        self.n = c.n_nodes
        r = c.n_reps
        alive, w = c.rep_alive[:r], c.rep_w[:r]
        self.count: dict[int, Counter[int]] = {}  # workload -> node -> replicas
        if (limit >= NO_LIMIT).all():
            return
        limited = alive & (limit[w] < NO_LIMIT)
        for target in (c.rep_node[:r], c.rep_move[:r]):
            on = np.flatnonzero(limited & (target >= 0))
            for k, node in zip(w[on].tolist(), target[on].tolist(), strict=True):
                self.add(k, node)

    def room(self, w: int) -> BoolArray:
        """[node] whether another replica of `w` may go there."""
        ok = np.ones(self.n, dtype=bool)
        if self.limit[w] >= NO_LIMIT:
            return ok
        for node, m in self.count.get(w, {}).items():
            if m >= self.limit[w]:
                ok[node] = False
        return ok

    def add(self, w: int, node: int) -> None:
        if self.limit[w] < NO_LIMIT:
            self.count.setdefault(w, Counter())[node] += 1
