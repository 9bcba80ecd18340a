"""Candidate filters: which pools may run a workload, and why the others may not.

Each filter is a named boolean mask over the pool table (Karmada-style
filter results as data), so "why not site X" and the minimal conflicting set
of an infeasible request are computed from the same masks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from broker.core.domain import Arch, BurstablePolicy, CapacityType, Workload
from broker.core.pooltable import ARCHES, CAPACITY_TYPES, BoolArray, PoolTable
from broker.core.requirements import Operator, Requirement
from broker.solver.problem import PlacementProblem
from pricing.node_classes import ACCELERATED, NODE_CLASSES, OPT_IN_CLASSES


@dataclass(frozen=True)
class NamedMask:
    label: str  # constraint name used in conflicts/binding lists, e.g. "residency:gdpr-eu on api"
    reason: str  # short reason key for rejection counts, e.g. "residency"
    mask: BoolArray  # True = pool allowed by this constraint


def _fmt(x: float) -> str:
    return f"{x:g}"


MaskCache = dict[tuple[object, ...], BoolArray]


def _cached(cache: MaskCache | None, key: tuple[object, ...], make: Callable[[], BoolArray]) -> BoolArray:
    """Masks repeat across the workloads of a big request: compute each distinct one once."""
    if cache is None:
        return make()
    if key not in cache:
        cache[key] = make()
    return cache[key]


def _lookup(values: npt.NDArray[np.int64], allowed: list[int], n: int) -> BoolArray:
    table = np.zeros(n, dtype=bool)
    table[allowed] = True
    return np.asarray(table[values], dtype=bool)


def workload_filters(problem: PlacementProblem, w: Workload, cache: MaskCache | None = None) -> list[NamedMask]:
    """All hard per-pool constraints of `w`, each as a mask (order = report order)."""
    t = problem.table
    on = f" on {w.name}"
    out: list[NamedMask] = []

    def size_mask() -> BoolArray:
        ok = (t.vcpus >= w.cpu - 1e-9) & (t.memory_gib >= w.memory_gib - 1e-9)
        if w.gpus > 0:
            ok &= t.gpus >= w.gpus - 1e-9
        return ok

    fits = _cached(cache, ("size", w.cpu, w.memory_gib, w.gpus), size_mask)
    size = f"size:cpu={_fmt(w.cpu)},memory_gib={_fmt(w.memory_gib)}"
    if w.gpus:
        size += f",gpus={_fmt(w.gpus)}"
    out.append(NamedMask(size + on, "size", fits))
    if w.gpu_model:
        gm = _cached(cache, ("gpu_model", w.gpu_model), lambda: np.asarray(t.gpu_model == w.gpu_model))
        out.append(NamedMask(f"gpu_model:{w.gpu_model}{on}", "gpu_model", gm))

    arch_ok = _cached(
        cache,
        ("arch", w.arch),
        lambda: _lookup(t.arch_idx, [ARCHES.index(Arch(a)) for a in w.arch], len(ARCHES)),
    )
    out.append(NamedMask(f"arch:[{','.join(a.value for a in w.arch)}]{on}", "arch", arch_ok))

    caps = list(w.capacity_types)
    if w.max_spot_fraction is not None and w.max_spot_fraction <= 0:
        caps = [c for c in caps if c != CapacityType.SPOT]
    cap_ok = _cached(
        cache,
        ("caps", tuple(caps)),
        lambda: _lookup(t.cap_idx, [CAPACITY_TYPES.index(c) for c in caps], len(CAPACITY_TYPES)),
    )
    out.append(
        NamedMask(f"capacity_types:[{','.join(c.value for c in w.capacity_types)}]{on}", "capacity_type", cap_ok)
    )

    if w.providers:
        out.append(NamedMask(f"providers:[{','.join(w.providers)}]{on}", "provider", t.provider_mask(w.providers)))

    out += _node_filters(problem, w, on, cache)

    if w.residency is not None:
        pol = w.residency
        label = pol.name or "inline"
        rm = _cached(
            cache,
            ("residency", pol),
            lambda: np.array([pol.allows(s) for s in t.sites], dtype=bool)[t.site_idx],
        )
        out.append(NamedMask(f"residency:{label}{on}", "residency", rm))

    for region, slo in w.latency_slo_ms.items():
        rtt = problem.user_rtt.get(region)
        if rtt is None:
            continue  # unknown regions are rejected by request validation
        lm = _cached(cache, ("latency", region, slo), partial(_within, rtt, slo, t.site_idx))
        out.append(NamedMask(f"latency_slo_ms:{region}<={_fmt(slo)}{on}", "latency", lm))

    for i, req in enumerate(w.requirements):
        key = ("requirement", req.attribute, req.operator, req.texts, req.numbers)
        rq = _cached(cache, key, partial(_meets, t, req))
        out.append(NamedMask(f"requirements[{i}]:{req.describe()}{on}", "requirement", rq))

    avail = _cached(cache, ("available",), lambda: t.max_nodes > 0)
    out.append(NamedMask(f"capacity:available{on}", "no_capacity", avail))
    return out


# requirements that pick instance types by name or class: the workload then chose what it runs on
_NAMING = frozenset({"node_class", "quota_group", "instance_type", "instance_family", "instance_category"})
_GPU_ATTRIBUTES = frozenset({"gpu_name", "gpus", "gpu_memory_gib"})


def allowed_opt_in_classes(w: Workload) -> frozenset[str]:
    """The opt-in node classes (accelerated, HPC) a workload may run on: accelerated when it asks for
    accelerators, any class when a requirement names types or classes (`node_class In [hpc]`,
    `instance_family In [hpc6a]`): the requirement itself then decides."""
    if any(r.attribute in _NAMING and r.operator is not Operator.NOT_IN for r in w.requirements):
        return OPT_IN_CLASSES
    wants_gpu = w.gpus > 0 or w.gpu_model is not None
    wants_gpu |= any(
        r.attribute in _GPU_ATTRIBUTES and r.operator is not Operator.DOES_NOT_EXIST for r in w.requirements
    )
    return frozenset({ACCELERATED}) if wants_gpu else frozenset()


def _node_filters(problem: PlacementProblem, w: Workload, on: str, cache: MaskCache | None) -> list[NamedMask]:
    """What the catalog's nodes are beyond their size (docs/solver.md, "Node classes"): burstable
    baselines, the classes a workload must opt into, the tenant's family quotas."""
    t = problem.table
    out: list[NamedMask] = []
    # at sustained capacity (the default table) a burstable pool already holds only what its baseline
    # sustains; at full capacity (a request with `allow` workloads) the others are kept off it
    if w.burstable is BurstablePolicy.NEVER or (w.burstable is BurstablePolicy.BASELINE and t.burst_capacity):
        steady = _cached(cache, ("steady",), lambda: np.asarray(t.baseline >= 1.0, dtype=bool))
        out.append(NamedMask(f"burstable:{w.burstable.value}{on}", "burstable", steady))
    blocked = sorted(OPT_IN_CLASSES - allowed_opt_in_classes(w))
    if blocked:
        ok = _cached(
            cache,
            ("node_class", tuple(blocked)),
            lambda: ~np.isin(t.node_class_idx, [NODE_CLASSES.index(c) for c in blocked]),
        )
        out.append(NamedMask(f"node_class:not [{','.join(blocked)}]{on}", "node_class", ok))
    for group, quota in sorted(problem.family_quotas.items()):
        # a node of the group larger than the quota cannot start (0: none can)
        qm = _cached(cache, ("quota", group, quota), partial(_within_quota, t, group, quota))
        out.append(NamedMask(f"quota:{group} {_fmt(quota)} vCPUs{on}", "quota", qm))
    return out


def _within_quota(t: PoolTable, group: str, quota: float) -> BoolArray:
    return np.asarray(~((t.quota_group == group) & (t.raw_vcpus > quota + 1e-9)), dtype=bool)


def _meets(t: PoolTable, req: Requirement) -> BoolArray:
    return t.attributes.mask(req)


def _within(rtt: npt.NDArray[np.float64], slo: float, site_idx: npt.NDArray[np.int64]) -> BoolArray:
    return np.asarray((rtt <= slo)[site_idx], dtype=bool)


def combine(masks: list[NamedMask], n: int) -> BoolArray:
    ok = np.ones(n, dtype=bool)
    for m in masks:
        ok &= m.mask
    return ok


def rejection_counts(masks: list[NamedMask], n: int) -> dict[str, int]:
    """Pools rejected, counted by the first constraint (in report order) that rejects them."""
    remaining = np.ones(n, dtype=bool)
    counts: dict[str, int] = {}
    for m in masks:
        rejected = remaining & ~m.mask
        k = int(rejected.sum())
        if k:
            counts[m.reason] = counts.get(m.reason, 0) + k
        remaining &= m.mask
    return counts


def site_rejection_counts(masks: list[NamedMask], table: PoolTable) -> dict[str, int]:
    """Sites with no usable pool, counted by the first constraint that empties them."""
    n_sites = table.n_sites
    order, starts, seg_site = _site_groups(table)
    alive = np.zeros(n_sites, dtype=bool)
    alive[seg_site] = True
    remaining = np.ones(table.n_pools, dtype=bool)
    counts: dict[str, int] = {}
    for m in masks:
        remaining &= m.mask
        still = np.zeros(n_sites, dtype=bool)
        # any surviving pool per site, over pools grouped by site
        still[seg_site] = np.logical_or.reduceat(remaining[order], starts)
        lost = int((alive & ~still).sum())
        if lost:
            counts[m.reason] = counts.get(m.reason, 0) + lost
        alive = still
    return counts


_GROUPS: dict[int, tuple[PoolTable, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]]] = {}


def _site_groups(
    table: PoolTable,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Pools ordered by site with segment starts, computed once per catalog table."""
    hit = _GROUPS.get(id(table))
    if hit is not None and hit[0] is table:
        return hit[1]
    order = np.argsort(table.site_idx, kind="stable")
    ss = table.site_idx[order]
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]]) if len(ss) else np.zeros(0, dtype=np.int64)
    groups = (order, starts, ss[starts] if len(ss) else np.zeros(0, dtype=np.int64))
    _GROUPS.clear()  # one catalog version at a time
    _GROUPS[id(table)] = (table, groups)
    return groups


def minimal_conflict(masks: list[NamedMask], n: int, *, ok: Callable[[BoolArray], bool] | None = None) -> list[str]:
    """Deletion filter: a smallest-by-inclusion subset of constraints that still leaves no candidate.

    `ok(mask)` says whether a combined mask is satisfiable (default: any pool left).
    """
    test = ok if ok is not None else (lambda mk: bool(mk.any()))
    active = list(masks)
    i = 0
    while i < len(active):
        trial = active[:i] + active[i + 1 :]
        if not test(combine(trial, n)):
            active = trial  # still conflicting without it: not needed
        else:
            i += 1
    return [m.label for m in active]
