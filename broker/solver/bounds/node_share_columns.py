"""The node-share bound's columns: every (class, pool) pair that some cpu/memory split can make the
cheapest of its segment, their prices at any split, and the floors a split gives (node_share.py
explains the bound)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker.core.pooltable import CAPACITY_TYPES, BoolArray, FloatArray, IntArray
from broker.solver.model.columns import Index
from broker.solver.model.layout import ModelInput
from broker.solver.prepare.classes import SPOT, WorkloadClass
from broker.solver.types import DualPrices

Float32Array = npt.NDArray[np.float32]

CHUNK = 1 << 20  # columns evaluated at once: no array as long as the columns but the data


@dataclass
class ShareColumns:
    """The (class, pool) columns that can be the cheapest of their segment at some split.

    Columns are ordered by class, then segment: a segment is a class's columns at one site
    (spread classes; one segment for all sites otherwise) and of one kind, spot or not (classes
    with a spot cap). A group is a class's segments at one site."""

    pool: Index  # 32-bit
    # each column's price with its pool's split all on memory (lam = 0) and all on cpu (lam = 1),
    # in float32 rounded down: prices only fall, so every floor stays valid, and big requests
    # hold half the memory for them; each = at_mem + lam[pool] (at_cpu - at_mem)
    at_mem: Float32Array
    at_cpu: Float32Array
    seg_bound: IntArray  # per segment: its first column; then the number of columns
    chunks: IntArray  # first segment of each chunk of about CHUNK columns; then the number of segments
    seg_class: IntArray
    seg_group: IntArray
    seg_spot: BoolArray
    group_start: IntArray  # per group: its first segment
    group_class: IntArray
    group_site: IntArray  # -1 for classes not split by site
    class_seg: IntArray  # per class: its first segment
    class_group: IntArray  # per class: its first group
    replicas: FloatArray  # per class
    spot_cap: FloatArray  # spot replicas allowed (= replicas without a cap)
    off: FloatArray  # replicas kept off the cheapest site (0 without spread)
    n_pools: int


@dataclass
class SplitPoint:
    """The floors at one split."""

    value: float
    floor: FloatArray  # per class
    seg_min: FloatArray
    low: FloatArray  # per class: cheapest column
    nonspot: FloatArray  # cheapest non-spot column
    other: FloatArray  # cheapest column off the cheapest column's site
    first_group: IntArray  # the group of the cheapest column
    choice: IntArray  # which floor holds: 0 plain, 1 spot cap, 2 spread


def column_prices(cols: ShareColumns, lam: FloatArray, c0: int, c1: int) -> tuple[FloatArray, FloatArray]:
    """The prices of columns c0:c1 at the split `lam`, and their slopes in it (float64)."""
    at_mem = cols.at_mem[c0:c1].astype(np.float64)
    slope = cols.at_cpu[c0:c1] - at_mem
    return lam[cols.pool[c0:c1]] * slope + at_mem, slope


def column_chunks(cols: ShareColumns) -> list[tuple[int, int, int, int]]:
    """(first segment, end segment, first column, end column) of each chunk."""
    return [
        (int(s0), int(s1), int(cols.seg_bound[s0]), int(cols.seg_bound[s1]))
        for s0, s1 in zip(cols.chunks[:-1], cols.chunks[1:], strict=True)
    ]


def segments_per_class(cols: ShareColumns) -> IntArray:
    out: IntArray = np.diff(np.r_[cols.class_seg, len(cols.seg_class)])
    return out


def evaluate_split(cols: ShareColumns, lam: FloatArray) -> SplitPoint:
    seg_min = segment_minima(cols, lam)
    group_min = np.minimum.reduceat(seg_min, cols.group_start)
    low = np.minimum.reduceat(group_min, cols.class_group)
    nonspot = np.minimum.reduceat(np.where(cols.seg_spot, np.inf, seg_min), cols.class_seg)
    first_group = _first_of_each(np.flatnonzero(group_min == low[cols.group_class]), cols.group_class)
    group_min[first_group] = np.inf
    other = np.minimum.reduceat(group_min, cols.class_group)

    r, cap, off = cols.replicas, cols.spot_cap, cols.off
    spot_holds = (cap < r) & np.isfinite(nonspot)
    spread_holds = (off > 0) & np.isfinite(other)
    floors = np.stack(
        [
            r * low,
            np.where(spot_holds, cap * low + (r - cap) * np.where(spot_holds, nonspot, 0.0), -np.inf),
            np.where(spread_holds, (r - off) * low + off * np.where(spread_holds, other, 0.0), -np.inf),
        ]
    )
    choice = np.argmax(floors, axis=0)
    floor = np.take_along_axis(floors, choice[None, :], axis=0)[0]
    return SplitPoint(float(floor.sum()), floor, seg_min, low, nonspot, other, first_group, choice)


def segment_minima(cols: ShareColumns, lam: FloatArray) -> FloatArray:
    """Each segment's cheapest price, a chunk of segments at a time."""
    seg_min = np.empty(len(cols.seg_bound) - 1)
    for s0, s1, c0, c1 in column_chunks(cols):
        each, _ = column_prices(cols, lam, c0, c1)
        seg_min[s0:s1] = np.minimum.reduceat(each, cols.seg_bound[s0:s1] - c0)
    return seg_min


def _first_of_each(idx: IntArray, owner: IntArray) -> IntArray:
    """The first of the sorted positions `idx` for each owner among them."""
    own = owner[idx]
    out: IntArray = idx[np.r_[True, own[1:] != own[:-1]]] if len(idx) else idx
    return out


def share_columns(
    mi: ModelInput, paired: BoolArray | None = None, duals: DualPrices | None = None, *, with_gpu_share: bool = True
) -> ShareColumns:
    """Every class's candidate columns, less those no split can make the cheapest of their
    segment (their cheapest share costs more than another's dearest): most columns of a big
    request go. Two passes over the classes, so only the kept columns' positions are held while
    the arrays are built. `with_gpu_share`: GPU nodes hand their GPUs a share of their cost
    first (`gpu_share`); without, a GPU replica pays a cpu/memory sliver of its node."""
    spot_pool = mi.cap_idx == SPOT
    if duals is None:
        to_gpus = gpu_share(mi) if with_gpu_share else np.zeros(mi.n_pools)
        split = mi.node_cost * (1.0 - to_gpus)  # what the cpu/memory split shares out
        gpu_price = np.where(mi.gpus > 0, mi.node_cost * to_gpus / np.maximum(mi.gpus, 1e-12), 0.0)
    else:
        # the LP's pools: what their duals leave, GPUs priced by their rows; the rest: the whole
        # node, as the LP's reduced costs read it (a GPU share made the other classes' columns on GPU
        # nodes cheaper than the LP's prices, and lowered the floors)
        split = np.where(np.isnan(duals.slack), mi.node_cost, duals.slack)
        gpu_price = np.zeros(mi.n_pools)
    # a pool whose overhead leaves no allocatable cpu or memory sells none: an infinite price
    cpu_price = np.divide(split, mi.vcpus, out=np.full(mi.n_pools, np.inf), where=mi.vcpus > 0)
    mem_price = np.divide(split, mi.mem, out=np.full(mi.n_pools, np.inf), where=mi.mem > 0)
    kept: list[Index] = []
    seg_start: list[IntArray] = []
    seg_key: list[IntArray] = []
    size = 0
    sited = np.array([c.min_sites > 1 for c in mi.classes], dtype=bool)
    if paired is not None:
        sited |= paired  # the egress floor needs each site's cheapest column
    for i, c in enumerate(mi.classes):
        cand = c.cand
        cpu = c.demand[0] * cpu_price[cand]
        mem = c.demand[1] * mem_price[cand]
        fixed = c.rep_cost + c.demand[2] * gpu_price[cand]
        if duals is not None:
            fixed += duals.unit[cand] @ c.demand
        key = None  # site * 2 + spot, where the floors need them
        if sited[i] or c.spot_cap is not None:
            key = 2 * mi.site_idx[cand] if sited[i] else np.zeros(len(cand), dtype=np.int64)
            if c.spot_cap is not None:
                key += spot_pool[cand]
        lo, hi = fixed + np.minimum(cpu, mem), fixed + np.maximum(cpu, mem)
        keep, start = _could_be_cheapest(c, key, lo, hi, every_site=paired is not None and bool(paired[i]))
        kept.append(keep.astype(np.int32))
        seg_start.append(start + size)
        seg_key.append(np.zeros(1, dtype=np.int64) if key is None else key[keep[start]])
        size += len(keep)

    pool = np.empty(size, dtype=np.int32)
    at_mem = np.empty(size, dtype=np.float32)
    at_cpu = np.empty(size, dtype=np.float32)
    at = 0
    for c, keep in zip(mi.classes, kept, strict=True):
        on = c.cand[keep]
        fixed = c.rep_cost[keep] + c.demand[2] * gpu_price[on]
        pool[at : at + len(on)] = on
        if duals is not None:
            fixed += duals.unit[on] @ c.demand
        mem, cpu = fixed + c.demand[1] * mem_price[on], fixed + c.demand[0] * cpu_price[on]
        at_mem[at : at + len(on)] = _round_down(mem)
        at_cpu[at : at + len(on)] = _round_down(cpu)
        at += len(on)

    n_segs = np.array([len(s) for s in seg_start])
    starts = np.concatenate(seg_start)
    keys = np.concatenate(seg_key)
    seg_class = np.repeat(np.arange(len(mi.classes)), n_segs)
    group_start = changes(seg_class, keys // 2)
    group_class = seg_class[group_start]
    classes = mi.classes
    return ShareColumns(
        pool=pool,
        at_mem=at_mem,
        at_cpu=at_cpu,
        seg_bound=np.r_[starts, size],
        chunks=np.r_[np.unique(np.searchsorted(starts, np.arange(0, size, CHUNK), side="right") - 1), len(starts)],
        seg_class=seg_class,
        seg_group=np.repeat(np.arange(len(group_start)), np.diff(np.r_[group_start, len(starts)])),
        seg_spot=(keys % 2).astype(bool),
        group_start=group_start,
        group_class=group_class,
        group_site=np.where(sited[group_class], keys[group_start] // 2, -1),
        class_seg=np.r_[0, np.cumsum(n_segs)[:-1]],
        class_group=np.searchsorted(seg_class[group_start], np.arange(len(classes))),
        replicas=np.array([c.replicas for c in classes], dtype=np.float64),
        spot_cap=np.array([c.replicas if c.spot_cap is None else c.spot_cap for c in classes], dtype=np.float64),
        off=np.array([min((c.min_sites - 1) * c.size, c.replicas) for c in classes], dtype=np.float64),
        n_pools=mi.n_pools,
    )


def _round_down(x: FloatArray) -> Float32Array:
    """x in float32, rounded towards -inf."""
    y = x.astype(np.float32)
    out: Float32Array = np.where(y > x, np.nextafter(y, np.float32(-np.inf)), y)
    return out


def gpu_share(mi: ModelInput) -> FloatArray:
    """Per pool, the share of a GPU node's cost its GPUs carry (0 elsewhere): what the node costs
    above the cheapest cover of its cpu and memory by one larger GPU-less pool of its site,
    capacity type and architecture. Split by cpu and memory alone, a GPU replica paid a sliver
    of its node, and a few GPU workloads held most of the distance between this bound and the
    LP. Any share in [0, 1] is a valid multiplier on the GPU rows; this one keeps each GPU node's
    cpu and memory prices at or above those of that pool, so other classes do not flock to it
    (covers by any pool, or any of the same architecture, gave far weaker bounds)."""
    gpu = mi.gpus > 0
    out = np.zeros(mi.n_pools)
    if not gpu.any() or not (mi.class_demand[:, 2] > 0).any():
        return out  # nothing to charge: the share would only make GPU nodes cheaper for the rest
    arch = mi.arch_idx if len(mi.arch_idx) else np.zeros(mi.n_pools, dtype=np.int64)
    cell = (mi.site_idx.astype(np.int64) * len(CAPACITY_TYPES) + mi.cap_idx) * (int(arch.max()) + 1) + arch
    order = np.argsort(cell, kind="stable")
    bounds = np.r_[0, np.flatnonzero(np.diff(cell[order])) + 1, len(order)]
    for a, b in itertools.pairwise(bounds.tolist()):
        pools = order[a:b]
        # a node that offers nothing (allocatable 0) covers nothing
        g, q = pools[gpu[pools]], pools[~gpu[pools] & (mi.vcpus[pools] > 0) & (mi.mem[pools] > 0)]
        if len(g) == 0 or len(q) == 0:
            continue
        # p's cpu and memory on q's nodes, fractionally: c_q max(v_p / v_q, m_p / m_q), only
        # by nodes at least as large (a replica that fits p then fits q)
        cover = mi.node_cost[q] * np.maximum(mi.vcpus[g, None] / mi.vcpus[q], mi.mem[g, None] / mi.mem[q])
        large = (mi.vcpus[q] >= mi.vcpus[g, None]) & (mi.mem[q] >= mi.mem[g, None])
        best = np.where(large, cover, np.inf).min(axis=1)
        cost = mi.node_cost[g]
        share = np.where((cost > 0) & np.isfinite(best), 1.0 - best / np.where(cost > 0, cost, 1.0), 0.0)
        out[g] = np.clip(share, 0.0, 1.0)
    return out


def _could_be_cheapest(
    c: WorkloadClass, key: IntArray | None, lo: FloatArray, hi: FloatArray, *, every_site: bool = False
) -> tuple[IntArray, IntArray]:
    """The columns, ordered by segment, whose cheapest share (`lo`, over every split) is within
    the dearest share (`hi`) of the best column of their segment, and where each segment
    starts; for spread alone, only sites that could be among the two cheapest matter (unless
    `every_site`: the egress floor reads every site's cheapest column)."""
    if key is None:
        return np.flatnonzero(lo <= _slack(hi.min(keepdims=True))), np.zeros(1, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    start = changes(key[order])
    slack = _slack(np.minimum.reduceat(hi[order], start))
    seg = np.repeat(np.arange(len(start)), np.diff(np.r_[start, len(key)]))
    keep = lo[order] <= slack[seg]
    if c.min_sites > 1 and c.spot_cap is None and len(start) > 2 and not every_site:  # segments are sites here
        site_lo = np.minimum.reduceat(lo[order], start)
        keep &= (site_lo <= np.partition(slack, 1)[1])[seg]
    seg = seg[keep]
    return order[keep], changes(seg)


def _slack(hi: FloatArray) -> FloatArray:
    """A dearest share plus rounding: what the test keeps may only grow."""
    out: FloatArray = hi + 1e-9 * np.abs(hi) + 1e-12
    return out


def changes(*keys: IntArray) -> IntArray:
    """Positions where any of the sorted keys changes (and 0)."""
    n = len(keys[0])
    new = np.zeros(n, dtype=bool)
    new[:1] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    out: IntArray = np.flatnonzero(new)
    return out
