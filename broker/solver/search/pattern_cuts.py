"""Pattern cuts at an LP point: the pools whose replicas the LP packs into fewer nodes than any
packing can (model/patterns.py) get a cut, and column generation goes on from there.

Only pools where two or more classes meet: for one class the pattern LP is x / fit, which its
fit row already says. The cuts are valid for every placement that packs, so the LP with them
still bounds the whole catalog once no column prices out.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.model.layout import ModelInput
from broker.solver.model.mip import LPResult
from broker.solver.model.patterns import PatternBound, pattern_bound
from broker.solver.search.placements import class_nodes
from broker.solver.search.state import SearchState
from broker.solver.types import ClassPlacement

# a cut goes in when the pattern LP needs this much more than the LP's nodes (relative, absolute)
_VIOLATION_REL = 1e-4
_VIOLATION_ABS = 1e-6


def separate(st: SearchState, lp: LPResult, *, until: float) -> int:
    """Add the pattern cuts the LP point `lp` breaks, most broken pools first while time is left
    (perf_counter `until`); how many were added."""
    m, mi = st.m, st.mi
    cls, pool = m.x_keys()
    on = np.flatnonzero(lp.x > 1e-9)
    if len(on) == 0:
        return 0
    order = on[np.argsort(pool[on], kind="stable")]
    p_sorted = pool[order]
    starts = np.r_[0, np.flatnonzero(p_sorted[1:] != p_sorted[:-1]) + 1, len(order)]
    shared = [(int(p_sorted[a]), order[a:b]) for a, b in itertools.pairwise(starts) if b - a >= 2]
    # the dearest nodes first: a cut there lifts the LP most
    shared.sort(key=lambda item: -float(mi.node_cost[item[0]] * lp.nodes[item[0]]))
    added = 0
    for p, cols in shared:
        if time.perf_counter() > until:
            break
        c = cls[cols]
        bound = _pool_bound(mi, p, c, lp.x[cols])
        n = float(lp.nodes[p])
        if bound.nodes > n * (1 + _VIOLATION_REL) + _VIOLATION_ABS:
            m.add_pattern_cut(p, c, bound.pi)
            added += 1
    return added


def separate_integer(st: SearchState, x: ClassPlacement) -> int:
    """Add the pattern cuts of the pools where whole replicas of x need more nodes than the
    model's rows count (class_nodes without patterns); how many."""
    m, mi = st.m, st.mi
    by_pool: dict[int, list[tuple[int, int]]] = {}
    for (c, p), r in x.items():
        by_pool.setdefault(p, []).append((c, r))
    counted = class_nodes(replace(mi, pattern_nodes=None), x)
    added = 0
    for p, members in by_pool.items():
        if len(members) < 2 or m.pool_col[p] < 0:
            continue
        on = np.array([k for k, _ in members], dtype=np.int64)
        bound = _pool_bound(mi, p, on, np.array([float(r) for _, r in members]))
        if np.ceil(bound.nodes - 1e-6) > counted[p]:
            m.add_pattern_cut(p, on, bound.pi)
            added += 1
    return added


def _pool_bound(mi: ModelInput, p: int, cls: IntArray, x: FloatArray) -> PatternBound:
    """The pattern LP of pool p at replicas x of classes cls."""
    cap = np.array([mi.vcpus[p], mi.mem[p], mi.gpus[p]], dtype=np.float64)
    upper = mi.fit(cls, np.full(len(cls), p))[0].astype(np.float64)
    return pattern_bound(mi.class_demand[cls], cap, upper, x)
