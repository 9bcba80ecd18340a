"""Reduced costs of columns and pools (model/reduced_costs.py): what column generation keeps of
them once the MIPs take over."""

from __future__ import annotations

import numpy as np

from broker.solver.model.layout import make_layout
from broker.solver.model.reduced_costs import ColumnCosts, shortlist
from broker.solver.model.universe import make_universe

from ..support.cases import case


def test_the_shortlist_keeps_each_classs_best_priced_columns_and_its_best_on_the_marked_ones() -> None:
    mi, _, _, _ = case(0)
    uni = make_universe(mi, make_layout(mi))
    rng = np.random.default_rng(0)
    idx = rng.permutation(uni.size)[: uni.size // 2]
    rc = ColumnCosts(idx, rng.normal(0.0, 1.0, len(idx)))
    on = rng.random(len(idx)) < 0.3
    got = shortlist(uni.cols, rc, 3, on, 2)
    cls = uni.cols.cls(rc.idx)
    want: set[int] = set()
    for c in np.unique(cls):
        mine = np.flatnonzero(cls == c)
        want |= set(rc.idx[mine[np.argsort(rc.val[mine])[:3]]].tolist())
        marked = mine[on[mine]]
        want |= set(rc.idx[marked[np.argsort(rc.val[marked])[:2]]].tolist())
    assert set(got.idx.tolist()) == want
    assert len(got.idx) == len(want) < len(idx)
    # each kept column keeps its own reduced cost
    by_idx = dict(zip(rc.idx.tolist(), rc.val.tolist(), strict=True))
    assert all(by_idx[i] == v for i, v in zip(got.idx.tolist(), got.val.tolist(), strict=True))
