"""Enterprise-sized requests solved as groups of classes, merged into one placement.

Classes interact only through what they share: nodes of a pool (whole-node rounding), owned
pools' capacity, dependency traffic and a cap on moves. Split into groups that keep dependent
classes together and classes with the same candidate pools together, each group's LP is a few
times smaller; the simplex grows faster than linearly with it, so column generation converges
per group where the whole request gets a single round in its time.

What the split gives up is little: in the LP a pool's node cost is linear in its load, so the
groups' LPs add up to about the whole one; what is lost is whole nodes shared between groups
while they are searched, and merged, groups that use the same pool share its nodes again
(class_nodes counts them over the whole placement). A group weighs sqrt(candidate columns) per
class: by class count alone one group held most of the columns, by columns alone most of the
classes; SolverOptions.group_weight sets how many groups a request makes.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from broker.core.domain import BoundKind
from broker.core.pooltable import FloatArray, IntArray
from broker.solver.bounds.node_share import node_share_bound
from broker.solver.model.layout import ModelInput, make_layout
from broker.solver.options import SolverOptions
from broker.solver.search.pipeline import search
from broker.solver.search.placements import class_nodes, objective
from broker.solver.search.state import SearchResult, bound_of, in_thread
from broker.solver.types import BestSoFar, ClassPlacement, EgressColumns


def applies(mi: ModelInput, opts: SolverOptions) -> bool:
    """Whether `mi` is solved in groups: big enough, and no cap on moves, which couples every class."""
    return mi.max_moves is None and sum(len(c.cand) for c in mi.classes) > opts.split_min_cols


def search_in_groups(
    mi: ModelInput,
    *,
    starts: list[ClassPlacement],
    time_limit_s: float,
    seed: int,
    options: SolverOptions | None = None,
) -> SearchResult | None:
    """search() per group, one after the other, each with an equal share of the time left; owned
    pools hold for a group what the groups before it left. The bound is the whole request's
    node-share bound, in a thread from the start (a group's bound bounds only that group).
    Should a group find no placement in what owned capacity is left, the whole request is
    searched."""
    opts = options if options is not None else SolverOptions()
    started = time.perf_counter()
    end = started + opts.groups_end * time_limit_s
    lay = make_layout(mi)
    stop = threading.Event()
    so_far = BestSoFar()
    bound = in_thread(
        "share-bound", node_share_bound, mi, time_budget_s=0.9 * time_limit_s, egress=EgressColumns.of(lay),
        stop=stop, options=opts.share_bound, so_far=so_far,
    )  # fmt: skip
    weights = np.sqrt([len(c.cand) for c in mi.classes])
    parts: list[tuple[IntArray, ClassPlacement]] = []
    finite = np.isfinite(mi.max_nodes)
    used: dict[int, int] = {}
    rounds = pools = 0
    todo = groups(mi, weights, max(1, round(float(weights.sum()) / opts.group_weight)))
    for k, members in enumerate(todo):
        got = search(
            sub_input(mi, members, used),
            starts=[restrict(x, members) for x in starts],
            time_limit_s=(end - time.perf_counter()) / (len(todo) - k),
            seed=seed,
            options=opts,
            prove=False,
        )
        if got is None:
            stop.set()
            rest = max(0.1, started + time_limit_s - time.perf_counter())
            return search(mi, starts=starts, time_limit_s=rest, seed=seed, options=opts)
        parts.append((members, got.x))
        rounds, pools = max(rounds, got.lp_rounds), pools + got.pools_considered
        if finite.any():
            used = {p: n for p, n in class_nodes(mi, merged(parts)).items() if finite[p]}
    x = merged(parts)
    value = objective(mi, lay, x)
    # the node-share bound carries float error like any solver's: never claim more than is proven
    wait = started + time_limit_s - time.perf_counter() + opts.bound_wait_s
    lower = bound_of(bound, so_far, wait, stop)  # stop ends the ascent: the bound so far stands
    out_of_time = time.perf_counter() >= started + time_limit_s
    lower = min(lower * (1 - 1e-9), value)
    return SearchResult("feasible", x, value, lower, False, pools, rounds, out_of_time, BoundKind.NODE_SHARE.value)


def groups(mi: ModelInput, weights: FloatArray, n_groups: int) -> list[IntArray]:
    """Class indices in at most n_groups groups of similar weight: dependency-connected classes
    together, classes in order of their candidate set (same residency and latency rules: the
    same sites) so a group's classes compete for the same pools."""
    n = len(mi.classes)
    pairs = np.array([(k, v) for k, cl in enumerate(mi.classes) for v, _gib in cl.deps], dtype=np.int64)
    src, dst = pairs.reshape(-1, 2).T
    _, roots = connected_components(sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)), directed=False)
    # a component goes where its first class's candidate set does; sets in order of their pools
    # (the table orders pools by site)
    first_of: dict[int, int] = {}
    for i in range(n):
        first_of.setdefault(int(roots[i]), i)
    keys = {r: _set_key(mi.classes[i].cand) for r, i in first_of.items()}
    order = sorted(range(n), key=lambda i: (keys[int(roots[i])], int(roots[i]), i))
    cols = weights[order]
    target = cols.sum() / max(n_groups, 1)
    out: list[list[int]] = [[]]
    filled = 0.0
    for pos, i in enumerate(order):
        # a group closes at its share, never inside a dependency component
        starts_component = pos == 0 or roots[order[pos - 1]] != roots[i]
        if filled >= target and starts_component and len(out) < n_groups:
            out.append([])
            filled = 0.0
        out[-1].append(i)
        filled += cols[pos]
    return [np.array(sorted(g), dtype=np.int64) for g in out if g]


def _set_key(cand: IntArray) -> tuple[int, ...]:
    """Orders candidate sets by their pools, equal sets next to each other."""
    return (int(cand[0]), int(cand[-1]), len(cand), int(cand.sum())) if len(cand) else (-1,)


def sub_input(mi: ModelInput, members: IntArray, used_nodes: dict[int, int] | None = None) -> ModelInput:
    """The request of the classes `members` alone (renumbered in that order), owned pools holding
    what `used_nodes` (nodes other groups already run) leaves. The classes' current placement
    comes along; a cap on moves does not split, so it is not asked for here."""
    assert mi.max_moves is None, "a cap on moves couples every class"
    new_of = np.full(len(mi.classes), -1, dtype=np.int64)
    new_of[members] = np.arange(len(members))
    classes = [
        dataclasses.replace(cl, deps=[(int(new_of[v]), gib) for v, gib in cl.deps])
        for cl in (mi.classes[int(i)] for i in members)
    ]
    keep = new_of[mi.keep_class] >= 0
    max_nodes = mi.max_nodes
    if used_nodes:
        max_nodes = max_nodes.copy()
        for p, nodes in used_nodes.items():
            max_nodes[p] = max(max_nodes[p] - nodes, 0.0)
    return dataclasses.replace(
        mi,
        classes=classes,
        max_nodes=max_nodes,
        keep_class=new_of[mi.keep_class[keep]],
        keep_pool=mi.keep_pool[keep],
        keep_cur=mi.keep_cur[keep],
        current_total=float(mi.keep_cur[keep].sum()),
    )


def restrict(x: ClassPlacement, members: IntArray) -> ClassPlacement:
    """A placement's part for the classes `members`, in sub_input's numbering."""
    new_of = {int(c): i for i, c in enumerate(members)}
    return {(new_of[c], p): r for (c, p), r in x.items() if c in new_of}


def merged(parts: list[tuple[IntArray, ClassPlacement]]) -> ClassPlacement:
    """The groups' placements in the whole request's numbering."""
    out: ClassPlacement = {}
    for members, x in parts:
        for (c, p), r in x.items():
            out[(int(members[c]), p)] = r
    return out
