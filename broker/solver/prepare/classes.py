"""Workload classes: identical workloads merged into one block of the model.

An enterprise request repeats a few t-shirt sizes under a few policies, so
thousands of workloads collapse into hundreds of classes with the same
candidate pools, demand and per-replica site cost. The model decides replicas
per class and pool; `disaggregate` deals them back to the member workloads.

Merging is exact (no placement is lost and none is added):
- without spread, any split of a class's replicas over its members is valid;
  a spot cap becomes the sum of the members' caps and spot replicas are dealt
  up to each member's own cap;
- with spread (min_sites m) members must also have the same replica count R;
  K members can each reach m distinct sites iff sum_s min(x_s, K) >= m*K
  (x_s = class replicas at site s), which the model states linearly with
  variables z_s <= x_s, z_s <= K. Dealing the replicas round-robin in site
  order realises it (see disaggregate.py). Spread together with a spot cap is
  not merged;
- workloads that send or receive `depends_on` traffic or carry a current
  placement stay alone: their site fractions enter egress and migration terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker.core.domain import CapacityType, Workload
from broker.core.pooltable import CAPACITY_TYPES, BoolArray, FloatArray, IntArray

SPOT = CAPACITY_TYPES.index(CapacityType.SPOT)


@dataclass
class WorkloadData:
    """One workload of the request with its filtered, non-dominated candidate pools."""

    w: Workload
    cand: IntArray
    rep_cost: FloatArray  # per-replica site cost (storage, latency term) on each candidate
    signature: tuple[object, ...]  # filter signature: equal signatures have equal candidate sets


@dataclass
class WorkloadClass:
    members: list[int]  # workload indices
    w: Workload  # representative member
    replicas: int  # total over members
    min_sites: int
    spot_cap: int | None  # total spot replicas allowed, None = no cap
    cand: IntArray
    rep_cost: FloatArray
    demand: FloatArray  # cpu, memory, gpus per replica
    deps: list[tuple[int, float]]  # (class index, GiB/h) for singleton classes

    @property
    def size(self) -> int:
        return len(self.members)


def spot_cap(w: Workload) -> int | None:
    if w.max_spot_fraction is None:
        return None
    return math.floor(w.max_spot_fraction * w.replicas + 1e-9)


def per_node_exact(
    cpu: FloatArray | float,
    memory: FloatArray | float,
    gpus: FloatArray | float,
    vcpus: FloatArray,
    mem: FloatArray,
    gpu_cap: FloatArray,
) -> FloatArray:
    """Element-wise: how many (cpu, memory, gpus) requests one node's capacity holds, unrounded
    (floor(x + 1e-9) of it is the whole replicas)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.minimum(vcpus / cpu, mem / memory)
        gpu = np.asarray(gpus) > 0
        out: FloatArray = np.where(gpu, np.minimum(exact, gpu_cap / np.where(gpu, gpus, 1.0)), exact)
    return out


def replica_fit(
    demand: FloatArray, replicas: FloatArray, vcpus: FloatArray, mem: FloatArray, gpus: FloatArray
) -> tuple[npt.NDArray[np.float32], BoolArray]:
    """Per (class, pool) pair, element-wise: replicas of the class that fit one node of the pool,
    capped at its replicas (x_cp <= fit n_p: a pool the class uses runs at least one node), and
    whether that row is stronger than the aggregate capacity rows (a node's remainder is lost).

    Computed when needed, never stored per universe column (tens of millions on big requests)."""
    exact = per_node_exact(demand[:, 0], demand[:, 1], demand[:, 2], vcpus, mem, gpus)
    fit = np.minimum(np.floor(exact + 1e-9), replicas)
    return np.maximum(fit, 1.0).astype(np.float32), fit < exact - 1e-9


def large_replica_weights(size: FloatArray, cap: FloatArray, k: int) -> FloatArray:
    """Element-wise per resource, the dual-feasible function u_k of Fekete and Schepers: a
    replica of `size` on a node of `cap` weighs floor((k+1) size/cap) / k, or size/cap where
    (k+1) size/cap is a whole number (0 where it needs none of the resource). The weights of
    the replicas on one node add up to at most 1, so a pool needs at least their sum in nodes.
    k=1: 1 above half a node, 1/2 at half; k=2: 1/2 between a third and two thirds, 1 above."""
    t = (k + 1) * size / np.where(cap > 0, cap, 1.0)
    whole = np.abs(t - np.round(t)) <= 1e-9 * np.maximum(t, 1.0)
    w = np.where(whole, t / (k + 1), np.floor(t) / k)
    out: FloatArray = np.where((size > 0) & (cap > 0), w, 0.0)
    return out


LARGE_REPLICA_KS = 2  # the k of the large-replica rows: 1..this


def large_replica_table(size: FloatArray, cap: FloatArray, ks: int = LARGE_REPLICA_KS) -> FloatArray:
    """large_replica_weights for k = 1..ks side by side along the last axis (resource r and k
    at (k - 1) * 3 + r)."""
    return np.concatenate([large_replica_weights(size, cap, k) for k in range(1, ks + 1)], axis=-1)


def _class_key(wd: WorkloadData, keep_alone: bool, index: int) -> tuple[object, ...]:
    w = wd.w
    if keep_alone or w.max_per_node is not None:  # a per-node limit is a member's own: not merged
        return ("alone", index)
    base: tuple[object, ...] = (
        wd.signature,
        w.cpu,
        w.memory_gib,
        w.gpus,
        w.storage_gib,
        w.storage_tier,
        w.min_sites,
    )
    if w.min_sites > 1:
        if w.max_spot_fraction is not None:
            return ("alone", index)
        return (*base, "R", w.replicas)
    return (*base, "spot", w.max_spot_fraction is not None)


def build_classes(
    workloads: Sequence[WorkloadData],
    *,
    vcpus: FloatArray,
    mem: FloatArray,
    gpus: FloatArray,
    name_index: dict[str, int],
    pinned: set[int],
) -> tuple[list[WorkloadClass], IntArray]:
    """Group workloads; returns the classes and each workload's class index."""
    linked: set[int] = set(pinned)
    for i, wd in enumerate(workloads):
        if wd.w.depends_on:
            linked.add(i)
            linked.update(name_index[d.workload] for d in wd.w.depends_on)
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, wd in enumerate(workloads):
        groups.setdefault(_class_key(wd, i in linked, i), []).append(i)
    of = np.zeros(len(workloads), dtype=np.int64)
    classes: list[WorkloadClass] = []
    for members in groups.values():
        wd = workloads[members[0]]
        w = wd.w
        d = np.array([w.cpu, w.memory_gib, w.gpus], dtype=np.float64)
        cand = wd.cand
        caps = [spot_cap(workloads[i].w) for i in members]
        classes.append(
            WorkloadClass(
                members=members,
                w=w,
                replicas=sum(workloads[i].w.replicas for i in members),
                min_sites=w.min_sites,
                spot_cap=None if caps[0] is None else sum(c or 0 for c in caps),
                cand=cand,
                rep_cost=wd.rep_cost,
                demand=d,
                deps=[],
            )
        )
        of[members] = len(classes) - 1
    for c in classes:
        if len(c.members) == 1:
            c.deps = [(int(of[name_index[d.workload]]), d.gib_per_hour) for d in c.w.depends_on]
    return classes, of
