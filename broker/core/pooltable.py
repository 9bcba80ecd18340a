"""Columnar view of the catalog's pools and sites for vectorised filtering.

The full public catalog has ~200k pools; per-request filters run as numpy
masks over these columns instead of Python loops over Pool objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from broker.core.domain import Arch, CapacityType, Pool, Site
from broker.core.pool_attributes import FactsByType, PoolAttributes, PoolColumns, build_pool_attributes, coded
from broker.core.pool_list import PoolList
from broker.core.reservations import reserved
from pricing.node_classes import NODE_CLASSES, baseline_percent, family_group

CAPACITY_TYPES: tuple[CapacityType, ...] = tuple(CapacityType)
ARCHES: tuple[Arch, ...] = tuple(Arch)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class PoolTable:
    sites: tuple[Site, ...]
    pools: PoolList
    site_index: dict[str, int]
    pool_index: dict[str, int]
    # per pool
    site_idx: IntArray
    cap_idx: IntArray  # index into CAPACITY_TYPES
    arch_idx: IntArray  # index into ARCHES
    vcpus: FloatArray  # per node: what pods may request (allocatable) once allocatable.py ran, else raw
    memory_gib: FloatArray
    gpus: FloatArray
    gpu_model: npt.NDArray[np.object_]
    price: FloatArray
    max_nodes: FloatArray  # inf = unbounded
    dominated: BoolArray  # never useful: a same-site pool is at least as large and as cheap
    dominator: IntArray  # the pool that dominates it (the cheapest), -1: none (or it can run nothing)
    # per node: the instance's own size (power, interruption risk and listings use it) and what
    # its managed Kubernetes reserves (reservations.py); allocatable.py derives vcpus/memory_gib
    raw_vcpus: FloatArray
    raw_memory_gib: FloatArray
    reserved_vcpus: FloatArray
    reserved_memory_gib: FloatArray
    # per node: the share of each vCPU it sustains (a burstable type's published baseline, 1 for every
    # other), its class (index into NODE_CLASSES) and its provider's quota group (pricing/node_classes.py)
    baseline: FloatArray
    node_class_idx: IntArray
    quota_group: npt.NDArray[np.object_]
    # per site
    site_provider: npt.NDArray[np.object_]
    site_lat: FloatArray
    site_lon: FloatArray
    pruned: int = 0  # dominated pools left out of this table (see `compact`)
    # burstable pools at their full vCPUs (a request with `burstable: allow`), else at their sustained
    # baseline once allocatable.py ran (docs/solver.md, "Burstable nodes")
    burst_capacity: bool = False
    # what catalogs state about instance types, for `attributes` (docs/solver-requirements.md, "Instance requirements")
    facts: FactsByType = field(default_factory=dict, compare=False, repr=False)

    # the attributes once built, in a box the tables `dataclasses.replace` derives per request
    # (fair-share caps, failed sites: same pools) share; `compact` starts an empty one
    attributes_box: list[PoolAttributes] = field(default_factory=list, compare=False, repr=False)

    @property
    def attributes(self) -> PoolAttributes:
        """The pools' well-known attributes as columns, built on first use (only instance
        requirements and the pool listing read them)."""
        if not self.attributes_box:
            cols = PoolColumns(
                sites=self.sites,
                instance_types=list(self.pools.column("instance_type")),
                site_idx=self.site_idx,
                arch=coded(self.arch_idx, [a.value for a in ARCHES]),
                capacity_type=coded(self.cap_idx, [c.value for c in CAPACITY_TYPES]),
                # an instance type's own size, as requirements name it (not what pods allocate)
                vcpus=self.raw_vcpus,
                memory_gib=self.raw_memory_gib,
                gpus=self.gpus,
                gpu_model=self.gpu_model,
                baseline=self.baseline,
                node_class=coded(self.node_class_idx, NODE_CLASSES),
                quota_group=self.quota_group,
            )
            self.attributes_box.append(build_pool_attributes(cols, self.facts))
        return self.attributes_box[0]

    @property
    def n_pools(self) -> int:
        return len(self.pools)

    @property
    def n_sites(self) -> int:
        return len(self.sites)

    def compact(self, keep: Collection[str] = ()) -> PoolTable:
        """The table without dominated pools. No cost-minimising placement needs one (replicas
        running on one now count as moved either way), and the full public catalog keeps 14 %
        of its pools, so every per-request filter, mask and count runs on 7x fewer rows.
        `keep`: pool ids kept even when dominated (still flagged, so never a candidate): the
        pools a placement in force runs on, which its baseline prices."""
        wanted = self.dominated.copy()
        wanted[[self.pool_index[p] for p in keep if p in self.pool_index]] = False
        idx = np.flatnonzero(~wanted)
        pools = self.pools.take(idx.tolist())
        return dataclasses.replace(
            self,
            pools=pools,
            pool_index={pid: i for i, pid in enumerate(pools.ids)},
            site_idx=self.site_idx[idx],
            cap_idx=self.cap_idx[idx],
            arch_idx=self.arch_idx[idx],
            vcpus=self.vcpus[idx],
            memory_gib=self.memory_gib[idx],
            gpus=self.gpus[idx],
            gpu_model=self.gpu_model[idx],
            price=self.price[idx],
            max_nodes=self.max_nodes[idx],
            dominated=self.dominated[idx],
            dominator=_remapped(self.dominator[idx], idx, self.n_pools),
            raw_vcpus=self.raw_vcpus[idx],
            raw_memory_gib=self.raw_memory_gib[idx],
            reserved_vcpus=self.reserved_vcpus[idx],
            reserved_memory_gib=self.reserved_memory_gib[idx],
            baseline=self.baseline[idx],
            node_class_idx=self.node_class_idx[idx],
            quota_group=self.quota_group[idx],
            pruned=self.pruned + self.n_pools - len(idx),
            attributes_box=[],
        )

    def dominated_within(self, among: BoolArray) -> BoolArray:
        """The pools of `among` that another pool of `among` dominates (as `dominated`): a
        workload whose instance requirements allow only `among` never needs them, whichever
        pools the requirements rule out. A pool whose dominator is allowed is dominated; only
        those whose dominator is not (an m7i when the m6i is ruled out) are ranked again,
        among the allowed pools of their sites."""
        d = self.dominator
        out = among & self.dominated & (d < 0)  # dominated without a dominator: it runs nothing
        has = among & (d >= 0)
        out[has] = among[d[has]]
        unsure = has & ~out
        if unsure.any():
            again = among & np.isin(self.site_idx, np.unique(self.site_idx[unsure]))
            found = _dominators(
                self.site_idx, self.cap_idx, self.arch_idx, self.gpu_model, self.vcpus, self.memory_gib,
                self.gpus, self.price, self.max_nodes, _kind(self.baseline, self.node_class_idx),
                self.raw_vcpus * self.baseline - self.reserved_vcpus, again,
            )  # fmt: skip
            out |= unsure & (found >= 0)
        return out

    def provider_mask(self, providers: Sequence[str]) -> BoolArray:
        """Pools whose site belongs to one of `providers`."""
        site_ok = np.isin(self.site_provider, list(providers))
        return np.asarray(site_ok[self.site_idx], dtype=bool)


def build_pool_table(
    sites: Sequence[Site], pools: Sequence[Pool] | PoolList, facts: FactsByType | None = None
) -> PoolTable:
    site_list = tuple(sites)
    site_index = {s.id: i for i, s in enumerate(site_list)}
    given = pools if isinstance(pools, PoolList) else PoolList.of(pools)
    sites_of = given.column("site")
    pool_list = given.take(i for i, site in enumerate(sites_of) if site in site_index)
    n = len(pool_list)
    cap_pos = {c: i for i, c in enumerate(CAPACITY_TYPES)}
    arch_pos = {a: i for i, a in enumerate(ARCHES)}
    col = pool_list.column
    site_idx = np.fromiter((site_index[s] for s in col("site")), dtype=np.int64, count=n)
    cap_idx = np.fromiter((cap_pos[c] for c in col("capacity_type")), dtype=np.int64, count=n)
    arch_idx = np.fromiter((arch_pos[a] for a in col("arch")), dtype=np.int64, count=n)
    vcpus = np.fromiter(col("vcpus"), dtype=np.float64, count=n)
    mem = np.fromiter(col("memory_gib"), dtype=np.float64, count=n)
    gpus = np.fromiter(col("gpus"), dtype=np.float64, count=n)
    gpu_model = np.array([g or "" for g in col("gpu_model")], dtype=object)
    price = np.fromiter(col("price_per_hour"), dtype=np.float64, count=n)
    max_nodes = np.fromiter((np.inf if m is None else float(m) for m in col("max_nodes")), dtype=np.float64, count=n)
    site_provider = np.array([s.provider for s in site_list], dtype=object)
    res_cpu, res_mem = reserved(site_provider[site_idx].tolist(), list(col("instance_type")), vcpus, mem)
    baseline, node_class_idx, quota_group = _node_classes(site_provider[site_idx], col("instance_type"), gpus)
    # on what pods can use: a per-node overhead setting shifts every pool alike, so this holds for any
    dominator = _dominators(
        site_idx, cap_idx, arch_idx, gpu_model, vcpus - res_cpu, mem - res_mem, gpus, price, max_nodes,
        _kind(baseline, node_class_idx), vcpus * baseline - res_cpu,
    )  # fmt: skip
    return PoolTable(
        sites=site_list,
        pools=pool_list,
        site_index=site_index,
        pool_index={pid: i for i, pid in enumerate(pool_list.ids)},
        site_idx=site_idx,
        cap_idx=cap_idx,
        arch_idx=arch_idx,
        vcpus=vcpus,
        memory_gib=mem,
        gpus=gpus,
        gpu_model=gpu_model,
        price=price,
        max_nodes=max_nodes,
        dominated=dominator >= 0,
        dominator=dominator,
        raw_vcpus=vcpus,
        raw_memory_gib=mem,
        reserved_vcpus=res_cpu,
        reserved_memory_gib=res_mem,
        baseline=baseline,
        node_class_idx=node_class_idx,
        quota_group=quota_group,
        site_provider=site_provider,
        site_lat=np.array([np.nan if s.lat is None else s.lat for s in site_list], dtype=np.float64),
        site_lon=np.array([np.nan if s.lon is None else s.lon for s in site_list], dtype=np.float64),
        facts=facts or {},
    )


def _node_classes(
    providers: npt.NDArray[np.object_], instance_types: Sequence[str], gpus: FloatArray
) -> tuple[FloatArray, IntArray, npt.NDArray[np.object_]]:
    """Per pool: baseline share per vCPU, node class index, quota group; derived once per distinct
    (provider, instance type, has GPUs), a few thousand, and broadcast."""
    n = len(gpus)
    baseline = np.ones(n, dtype=np.float64)
    cls = np.zeros(n, dtype=np.int64)
    group = np.empty(n, dtype=object)
    memo: dict[tuple[str, str, bool], tuple[float, int, str]] = {}
    for i, (prov, it, g) in enumerate(zip(providers.tolist(), instance_types, (gpus > 0).tolist(), strict=True)):
        key = (prov, it, g)
        hit = memo.get(key)
        if hit is None:
            fg = family_group(prov, it, 1.0 if g else 0.0)
            hit = memo[key] = (baseline_percent(prov, it) / 100.0, NODE_CLASSES.index(fg.node_class), fg.quota_group)
        baseline[i], cls[i], group[i] = hit
    return baseline, cls, group


def _kind(baseline: FloatArray, node_class_idx: IntArray) -> IntArray:
    """What domination may not cross: burstable or not, and the node class (a workload kept off
    burstable nodes or off accelerated ones must still find the pools they would have pruned)."""
    return np.asarray((baseline < 1.0).astype(np.int64) * len(NODE_CLASSES) + node_class_idx, dtype=np.int64)


def _dominators(
    site_idx: IntArray,
    cap_idx: IntArray,
    arch_idx: IntArray,
    gpu_model: npt.NDArray[np.object_],
    vcpus: FloatArray,
    mem: FloatArray,
    gpus: FloatArray,
    price: FloatArray,
    max_nodes: FloatArray,
    kind: IntArray,
    sustained: FloatArray,
    among: BoolArray | None = None,
) -> IntArray:
    """Per pool, a pool that dominates it (the first by price), or -1: among the pools of
    `among` only (default: every pool).

    Pool p is dominated when another unbounded pool q of the same site,
    capacity type, architecture, GPU model and kind (`_kind`) is at least as large in every
    resource, sustained vCPUs included, and no dearer: every replica that fits p fits q, passes the same
    filters, and q's nodes cost no more. Bounded (owned) pools are never
    pruned, their node count is part of the answer.
    """
    n = len(price)
    out = np.full(n, -1, dtype=np.int64)
    members = np.arange(n) if among is None else np.flatnonzero(among)
    if len(members) < 2:
        return out
    gpu_code = np.unique(gpu_model[members].astype(str), return_inverse=True)[1].ravel()
    # one integer per (site, capacity type, architecture, GPU model)
    group = site_idx[members].astype(np.int64)
    for code in (cap_idx[members], arch_idx[members], gpu_code, kind[members]):
        group = group * (int(code.max()) + 1) + code
    order = np.argsort(group, kind="stable")
    cuts = np.flatnonzero(np.diff(group[order])) + 1
    for part in np.split(order, cuts):
        if len(part) < 2:
            continue
        idx = members[part]
        # rank: cheapest first; among equal prices the larger node first, so exact ties keep one pool
        idx = idx[np.lexsort((-sustained[idx], -gpus[idx], -mem[idx], -vcpus[idx], price[idx]))]
        v, m, g, pr, su = vcpus[idx], mem[idx], gpus[idx], price[idx], sustained[idx]
        unbounded = max_nodes[idx] == np.inf
        # covers[j, i]: pool j (ranked before i) is at least as large as i and no dearer
        covers = (
            (v[:, None] >= v[None, :])
            & (m[:, None] >= m[None, :])
            & (g[:, None] >= g[None, :])
            & (su[:, None] >= su[None, :])
            & (pr[:, None] <= pr[None, :])
            & unbounded[:, None]
            & np.tri(len(idx), k=-1, dtype=bool).T
        )
        has = covers.any(axis=0) & unbounded
        out[idx[has]] = idx[covers.argmax(axis=0)[has]]
    return out


def _remapped(dominator: IntArray, kept: IntArray, n: int) -> IntArray:
    """Dominator indices into the table of the `kept` pools (-1 where the dominator is gone)."""
    position = np.full(n + 1, -1, dtype=np.int64)  # position[-1] = -1 keeps -1 as -1
    position[kept] = np.arange(len(kept))
    out: IntArray = position[dominator]
    return out
