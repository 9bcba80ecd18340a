"""One pool's replicas onto whole nodes: multi-dimensional bin packing (cpu, memory, GPUs).

Replicas of one workload are identical items, so an instance is a list of (count, size) and a
packing gives, per node, how many replicas of each item it holds. Three tools:

- `lower_bound`: no packing uses fewer nodes (each dimension's total over a node's capacity,
  each item's count over what one node holds, items above half or a third of a node);
- `first_fit_decreasing`: items by their largest share of a node, each replica on the first
  node with room (identical replicas placed as a batch, one vectorised pass over the nodes);
- `cp_sat`: the exact model over OR-Tools CP-SAT, warm-started from FFD, deterministic
  (one worker, a fixed seed, a deterministic-time limit), its search log off.

`pack_pool` is FFD's packing, proven minimal when it meets the lower bound; `improve` tries
CP-SAT on one that is not, within the time it is given, and keeps whichever uses fewer nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from broker.core.pooltable import FloatArray, IntArray
from broker.solver.prepare.classes import large_replica_table

# capacities and demands are compared with this relative slack: the aggregate model's
# floor(x + 1e-9) fits the same replicas
_EPS = 1e-9
# CP-SAT needs integers: cpu in millicores, memory in MiB, GPUs in thousandths (demands rounded
# up and capacities down, so a CP-SAT packing always fits in exact arithmetic too)
_SCALE = np.array([1000.0, 1024.0, 1000.0])
_UNLIMITED = 1 << 30  # replicas per node of an item that uses none of a node's dimensions
# up to this many nodes first-fit decreasing runs in plain Python (numpy's per-call cost would dominate)
_FEW_NODES = 64


@dataclass(frozen=True)
class PoolPacking:
    """Per node, (item index, replicas) pairs; how it was found; whether no packing uses fewer."""

    nodes: list[list[tuple[int, int]]]
    engine: str  # "ffd" | "cp-sat"
    proven: bool
    lower: int  # the lower bound on this pool's nodes
    ffd_nodes: int  # what first-fit decreasing used (the comparison the bench reports)


def per_node(size: FloatArray, cap: FloatArray) -> int:
    """Replicas of `size` one node of `cap` holds (dimensions the item does not use ignored)."""
    return int(item_fits(size[None, :], cap, None)[0])


def item_fits(sizes: FloatArray, cap: FloatArray, limits: Sequence[int | None] | None) -> IntArray:
    """Per item: replicas one node holds, within the item's own per-node limit (spread.max_per_node)."""
    used = sizes > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(used, cap[None, :] / np.where(used, sizes, 1.0), np.inf)
    fit = np.minimum(np.floor(ratio.min(axis=1) + _EPS), float(_UNLIMITED))
    if limits is not None:
        fit = np.minimum(fit, [_UNLIMITED if lim is None else lim for lim in limits])
    out: IntArray = fit.astype(np.int64)
    return out


def lower_bound(
    counts: Sequence[int], sizes: FloatArray, cap: FloatArray, limits: Sequence[int | None] | None = None
) -> int:
    """Nodes no packing of the items can do without."""
    counts_a = np.asarray(counts, dtype=np.float64)
    used = cap > 0
    total = (counts_a[:, None] * sizes)[:, used].sum(axis=0) / cap[used]
    bound = max(1, math.ceil(float(total.max(initial=0.0)) - 1e-6))
    fits = np.maximum(item_fits(sizes, cap, limits), 1)
    bound = max(bound, int(np.ceil(counts_a / fits).max()))
    # items above half (a third) of a node share nodes only so far: their dual-feasible weights
    # add up to at most 1 per node
    weights = (counts_a[:, None] * large_replica_table(sizes, np.broadcast_to(cap, sizes.shape))).sum(axis=0)
    return max(bound, math.ceil(float(weights.max(initial=0.0)) - 1e-6))


def first_fit_decreasing(
    counts: Sequence[int],
    sizes: FloatArray,
    cap: FloatArray,
    limits: Sequence[int | None] | None = None,
    *,
    few_nodes: int = _FEW_NODES,
    merge_alike: bool = True,
) -> list[list[tuple[int, int]]]:
    """Each replica on the first node with room for it (and below the item's per-node limit),
    items in decreasing order of their largest share of a node (ties: the sum of shares, then
    the item's index). Identical replicas go as a batch: one vectorised pass over the nodes, or
    a plain loop when at most `few_nodes` nodes can open."""
    fits = np.maximum(item_fits(sizes, cap, limits), 1)
    share = np.where(cap > 0, sizes / np.where(cap > 0, cap, 1.0), 0.0)
    order = np.lexsort((np.arange(len(counts)), -share.sum(axis=1), -share.max(axis=1))).tolist()
    runs = _alike_runs(order, sizes, fits, item_fits(sizes, cap, None))
    if merge_alike and len(runs) < len(order):
        return _merged(runs, counts, sizes, cap, limits, few_nodes)
    counts_l = [int(c) for c in counts]
    most = sum(-(-c // int(f)) for c, f in zip(counts_l, fits.tolist(), strict=True))
    slack = _EPS * np.maximum(cap, 1.0)
    dims = [np.flatnonzero(sizes[i] > 0).tolist() for i in range(len(counts_l))]
    if most <= few_nodes:
        return _ffd_few(order, counts_l, sizes.tolist(), fits.tolist(), cap.tolist(), slack.tolist(), dims)
    free = np.empty((most, len(cap)))  # free capacity per open node (at most one item's worth each)
    n_open = 0
    nodes: list[list[tuple[int, int]]] = []
    for i in order:
        left, size, used = counts_l[i], sizes[i], dims[i]
        if left <= 0:
            continue
        if n_open and used:
            # few numpy calls per item: their fixed cost, not the nodes, is most of the time
            room = (free[:n_open, used[0]] + slack[used[0]]) / size[used[0]]
            for d in used[1:]:
                np.minimum(room, (free[:n_open, d] + slack[d]) / size[d], out=room)
            # an item is placed in one pass: no node holds any of it yet, so its limit is the fit
            np.minimum(np.floor(room, out=room), fits[i], out=room)
            np.maximum(room, 0, out=room)
            before = np.cumsum(room) - room
            take = np.minimum(np.maximum(left - before, 0), room).astype(np.int64)
            hit = np.flatnonzero(take)
            if len(hit):
                for b, n in zip(hit.tolist(), take[hit].tolist(), strict=True):
                    nodes[b].append((i, n))
                    left -= n
                free[hit] -= take[hit, None] * size[None, :]
        if left > 0:
            per = int(fits[i])
            k = -(-left // per)
            amounts = np.full(k, per, dtype=np.int64)
            amounts[-1] = left - per * (k - 1)
            free[n_open : n_open + k] = cap[None, :] - amounts[:, None] * size[None, :]
            nodes += [[(i, int(a))] for a in amounts.tolist()]
            n_open += k
    return nodes


def _alike_runs(order: list[int], sizes: FloatArray, fits: IntArray, room_fits: IntArray) -> list[list[int]]:
    """`order` cut into runs of consecutive items of one size that no per-node limit binds
    (their fit is what a node's room allows). First fit pours such a run's replicas as if they
    were one item's, so the run is packed as one: many single-replica workloads of one shape
    (tens of thousands in the largest requests) cost a pass each over every open node otherwise."""
    runs: list[list[int]] = []
    for i in order:
        last = runs[-1][-1] if runs else -1
        alike = last >= 0 and fits[i] == room_fits[i] and fits[last] == room_fits[last]
        if alike and np.array_equal(sizes[i], sizes[last]):
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _merged(
    runs: list[list[int]],
    counts: Sequence[int],
    sizes: FloatArray,
    cap: FloatArray,
    limits: Sequence[int | None] | None,
    few_nodes: int,
) -> list[list[tuple[int, int]]]:
    """first_fit_decreasing with each run as one item, its replicas dealt back to the run's items
    in order, node by node: the packing the items one by one give."""
    merged = first_fit_decreasing(
        [sum(int(counts[i]) for i in run) for run in runs],
        sizes[[run[0] for run in runs]],
        cap,
        None if limits is None else [limits[run[0]] for run in runs],  # binding only on runs of one
        few_nodes=few_nodes,
    )  # runs are in packing order and keep it: their shares are their first item's
    left = [[int(counts[i]) for i in run] for run in runs]
    at = [0] * len(runs)  # per run: the item being dealt
    out: list[list[tuple[int, int]]] = []
    for node in merged:
        dealt: list[tuple[int, int]] = []
        for r, n in node:
            while n > 0:
                while left[r][at[r]] == 0:
                    at[r] += 1
                take = min(n, left[r][at[r]])
                dealt.append((runs[r][at[r]], take))
                left[r][at[r]] -= take
                n -= take
        out.append(dealt)
    return out


def _ffd_few(
    order: list[int],
    counts: list[int],
    sizes: list[list[float]],
    fits: list[int],
    cap: list[float],
    slack: list[float],
    dims: list[list[int]],
) -> list[list[tuple[int, int]]]:
    """first_fit_decreasing's pass in plain Python, the same arithmetic in the same order, for
    pools that open few nodes: numpy's fixed cost per call is most of the time there."""
    free: list[list[float]] = []
    nodes: list[list[tuple[int, int]]] = []
    for i in order:
        left, size, used = counts[i], sizes[i], dims[i]
        if left <= 0:
            continue
        if used:
            for b, room_b in enumerate(free):
                room = min(math.floor((room_b[d] + slack[d]) / size[d]) for d in used)
                take = min(max(room, 0), fits[i], left)
                if take > 0:
                    nodes[b].append((i, take))
                    for d in range(len(cap)):
                        room_b[d] -= take * size[d]
                    left -= take
                    if not left:
                        break
        per = fits[i]
        while left > 0:
            n = min(per, left)
            free.append([c - n * x for c, x in zip(cap, size, strict=True)])
            nodes.append([(i, n)])
            left -= n
    return nodes


def cp_sat(
    counts: Sequence[int],
    sizes: FloatArray,
    cap: FloatArray,
    *,
    hint: list[list[tuple[int, int]]],
    lower: int,
    time_s: float,
    seed: int,
    limits: Sequence[int | None] | None = None,
    wall_s: float | None = None,
) -> tuple[list[list[tuple[int, int]]], bool] | None:
    """The fewest nodes by CP-SAT, at most len(hint) of them, started from `hint`; the packing and
    whether it is proven optimal, or None when CP-SAT found nothing within `time_s` of
    deterministic time (or `wall_s` of the clock, default twice that: a backstop)."""
    dims = np.flatnonzero(cap > 0)
    size_i = np.ceil(sizes[:, dims] * _SCALE[dims] - 1e-6).astype(np.int64)
    cap_i = np.floor(cap[dims] * _SCALE[dims] + 1e-6).astype(np.int64)
    n_items, n_nodes = len(counts), len(hint)
    fits = item_fits(sizes, cap, limits).tolist()
    m = cp_model.CpModel()
    open_ = [m.new_bool_var(f"y{b}") for b in range(n_nodes)]
    x = [[m.new_int_var(0, min(int(counts[i]), fits[i]), f"x{i}_{b}") for b in range(n_nodes)] for i in range(n_items)]
    for i in range(n_items):
        m.add(sum(x[i]) == int(counts[i]))
    for b in range(n_nodes):
        for d in range(len(dims)):
            m.add(sum(int(size_i[i, d]) * x[i][b] for i in range(n_items) if size_i[i, d]) <= int(cap_i[d]) * open_[b])
        if b:  # open nodes first: the packings that differ only by which nodes are empty are one
            m.add_implication(open_[b], open_[b - 1])
    m.add(sum(open_) >= lower)
    m.minimize(sum(open_))
    placed = {(i, b): n for b, node in enumerate(hint) for i, n in node}
    for b in range(n_nodes):
        m.add_hint(open_[b], True)
        for i in range(n_items):
            m.add_hint(x[i][b], placed.get((i, b), 0))
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = 1  # one worker and a deterministic-time limit: the same answer on every run
    p.random_seed = seed
    p.max_deterministic_time = max(time_s, 0.01)
    p.max_time_in_seconds = max(2.0 * time_s if wall_s is None else wall_s, 0.05)  # a backstop on a loaded machine
    p.log_search_progress = False
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    nodes = []
    for b in range(n_nodes):
        row = [(i, int(solver.value(x[i][b]))) for i in range(n_items)]
        row = [(i, n) for i, n in row if n > 0]
        if row:
            nodes.append(row)
    return nodes, status == cp_model.OPTIMAL


def cp_sat_size(items: int, nodes: int) -> int:
    """Integer variables the CP-SAT model of an instance has (its build time grows with them)."""
    return items * nodes


def pack_pool(
    counts: Sequence[int], sizes: FloatArray, cap: FloatArray, limits: Sequence[int | None] | None = None
) -> PoolPacking:
    """The pool's replicas on nodes by first-fit decreasing, proven minimal when it meets the bound."""
    lower = lower_bound(counts, sizes, cap, limits)
    ffd = first_fit_decreasing(counts, sizes, cap, limits)
    return PoolPacking(ffd, "ffd", len(ffd) <= lower, lower, len(ffd))


def improve(
    packing: PoolPacking,
    counts: Sequence[int],
    sizes: FloatArray,
    cap: FloatArray,
    *,
    time_s: float,
    seed: int = 0,
    limits: Sequence[int | None] | None = None,
    wall_s: float | None = None,
) -> PoolPacking:
    """CP-SAT's packing when it uses no more nodes than `packing` (then also when it proves that
    packing minimal), else `packing` unchanged."""
    if packing.proven:
        return packing
    found = cp_sat(
        counts,
        sizes,
        cap,
        hint=packing.nodes,
        lower=packing.lower,
        time_s=time_s,
        seed=seed,
        limits=limits,
        wall_s=wall_s,
    )
    if found is None or len(found[0]) > len(packing.nodes):
        return packing
    nodes, optimal = found
    return PoolPacking(nodes, "cp-sat", optimal or len(nodes) <= packing.lower, packing.lower, packing.ffd_nodes)
