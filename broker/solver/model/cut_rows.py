"""The pattern cuts a restricted master holds (patterns.py), entry by entry.

A cut row sum_c pi_c x_cp - n_p <= 0 belongs to one pool. Replica columns of its classes that
join the master later get their coefficient (the row stays the cut it was proven as), and the
reduced costs of columns outside the master count the row's dual as theirs would.
"""

from __future__ import annotations

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.model.columns import ranges


class CutRows:
    def __init__(self, n_classes: int) -> None:
        self.n_classes = max(n_classes, 1)
        self._key = np.zeros(0, dtype=np.int64)  # pool * n_classes + class, sorted
        self._row = np.zeros(0, dtype=np.int64)
        self._coef = np.zeros(0)
        self.count = 0  # rows

    def add(self, row: int, pool: int, cls: IntArray, coef: FloatArray) -> None:
        key = np.concatenate([self._key, pool * self.n_classes + cls.astype(np.int64)])
        order = np.argsort(key, kind="stable")
        self._key = key[order]
        self._row = np.concatenate([self._row, np.full(len(cls), row, dtype=np.int64)])[order]
        self._coef = np.concatenate([self._coef, coef.astype(np.float64)])[order]
        self.count += 1

    def matching(self, cls: IntArray, pool: IntArray) -> tuple[IntArray, IntArray, FloatArray]:
        """Every entry of the pairs (cls[i], pool[i]): (i, its row, its coefficient)."""
        if len(self._key) == 0 or len(cls) == 0:
            none = np.zeros(0, dtype=np.int64)
            return none, none, np.zeros(0)
        query = pool.astype(np.int64) * self.n_classes + cls.astype(np.int64)
        lo = np.searchsorted(self._key, query, side="left")
        cnt = np.searchsorted(self._key, query, side="right") - lo
        at = ranges(lo, cnt)
        return np.repeat(np.arange(len(query)), cnt), self._row[at], self._coef[at]

    def dual_terms(self, row_dual: FloatArray, cls: IntArray, pool: IntArray) -> FloatArray:
        """Per pair (cls[i], pool[i]): what the cut rows' duals put in its column's A^T y."""
        i, row, coef = self.matching(cls, pool)
        out: FloatArray = np.bincount(i, weights=coef * row_dual[row], minlength=len(cls)).astype(np.float64)
        return out
