"""What every policy may buy: the catalog's pools at the fleet's sites, and what each workload may use.

Pure: built from the catalog's parts (pool table, latency model, transfer and storage prices),
which the edge loads (from the bundled snapshot in the CLI, from the broker's catalog in the
API). Reserved capacity is left out: a commitment is bought for years, not in 5-minute steps.

Every pool's vcpus and memory_gib are its allocatable capacity (broker/core/allocatable.py,
with the node overhead the edge's settings give), as the product's solver sees them: what
every policy packs on, what the broker policy solves over and what contention is counted
against; the instance's own size stays in raw_vcpus / raw_memory_gib (billed capacity).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from broker.core.allocatable import NodeOverhead, allocatable
from broker.core.domain import CapacityType, Site, SiteKind, UserRegion, Workload
from broker.core.latency import LatencyModel
from broker.core.node_startup import node_startup_s
from broker.core.pooltable import ARCHES, CAPACITY_TYPES, BoolArray, FloatArray, PoolTable, build_pool_table
from broker.errors import InvalidRequest
from broker.simulate.fleet import FleetIn
from broker.solver.answer.risk import interruption_risk_month
from broker.solver.problem import GIB_IN_GB, STORAGE_TIERS, PlacementProblem

HOURS_PER_MONTH = 730.0
SPOT = CAPACITY_TYPES.index(CapacityType.SPOT)
ONDEMAND = CAPACITY_TYPES.index(CapacityType.ONDEMAND)


@dataclass(frozen=True)
class CatalogParts:
    """The parts of a catalog a simulation reads (broker.catalog.store.Catalog has all of them)."""

    table: PoolTable
    latency: LatencyModel
    egress: FloatArray  # [site, site] USD/GB, NaN unknown, site order of `table`
    internet_egress: FloatArray  # [site]
    storage: FloatArray  # [site, tier] USD per GB-month


@dataclass(frozen=True)
class Market:
    table: PoolTable  # pools at the fleet's sites, no reserved capacity
    workloads: tuple[Workload, ...]  # the fleet's workloads at their declared size
    user_rtt: Mapping[str, FloatArray]  # user region -> RTT from each site
    egress: FloatArray  # [site, site] USD/GB, internet egress where the pair is unknown, 0 on the diagonal
    egress_raw: FloatArray
    internet_egress: FloatArray
    storage: FloatArray  # [site, tier] USD per GB-month
    storage_hour: FloatArray  # [workload, site] USD per replica-hour of the workload's volume
    startup_s: FloatArray  # [site]
    risk_month: FloatArray  # [pool] chance a spot node is reclaimed within a month, 0 for other pools
    residency_ok: BoolArray  # [workload, site]
    latency_ok: BoolArray  # [workload, site] every latency SLO of the workload met from the site
    feasible: BoolArray  # [workload, pool] every hard constraint but size (policies size replicas)
    hardware_ok: BoolArray  # [workload, pool] architecture and GPUs alone
    user_regions: tuple[UserRegion, ...]
    overhead: NodeOverhead = field(default_factory=NodeOverhead)  # per node, what DaemonSets request
    _tables: dict[tuple[object, ...], PoolTable] = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_sites(self) -> int:
        return self.table.n_sites

    def site_id(self, site: str, loc: list[Any]) -> int:
        if site not in self.table.site_index:
            raise InvalidRequest(
                f"{'.'.join(map(str, loc))}: unknown site {site!r}",
                errors=[{"loc": loc, "msg": f"unknown site {site!r}"}],
            )
        return self.table.site_index[site]

    def problem(self, request: Any, *, down: Sequence[int] = (), price: FloatArray | None = None) -> PlacementProblem:
        """The solver's input over this market: no pool at a failed site, prices as of now, and,
        as the broker's own catalog does (Catalog.solver_table), no dominated pool."""
        return self._problem(request, self.solver_table(tuple(sorted(down)), price))

    def solver_table(self, down: tuple[int, ...], price: FloatArray | None) -> PoolTable:
        key = (down, None if price is None else hashlib.sha1(price.tobytes()).hexdigest())
        cache = self._tables
        if key not in cache:
            t = self.table
            prices = t.price if price is None else price
            pools = [
                dataclasses.replace(p, price_per_hour=float(prices[i]))
                for i, p in enumerate(t.pools)
                if int(t.site_idx[i]) not in down
            ]
            if len(cache) > 8:
                cache.clear()
            cache[key] = allocatable(build_pool_table(t.sites, pools), self.overhead).compact()
        return cache[key]

    def _problem(self, request: Any, t: PoolTable) -> PlacementProblem:
        return PlacementProblem(
            request=request,
            table=t,
            user_rtt=dict(self.user_rtt),
            egress_usd_per_gb=self.egress_raw,
            internet_egress_usd_per_gb=self.internet_egress,
            storage_usd_per_gb_month=self.storage,
        )


def build_market(fleet: FleetIn, parts: CatalogParts, overhead: NodeOverhead | None = None) -> Market:
    """Raises InvalidRequest naming the field when the fleet names a site the catalog lacks.
    `overhead`: what DaemonSets request per node (the settings' node_overhead; default its default)."""
    overhead = overhead if overhead is not None else NodeOverhead()
    full = parts.table
    errors: list[dict[str, Any]] = []
    if fleet.sites is not None:
        for i, s in enumerate(fleet.sites):
            if s not in full.site_index:
                errors.append({"loc": ["sites", i], "msg": f"unknown site {s!r}"})
        wanted = [s for s in fleet.sites if s in full.site_index]
    else:
        wanted = [s.id for s in full.sites if s.kind == SiteKind.PUBLIC]
    for loc, site in _named_sites(fleet):
        if site not in full.site_index:
            errors.append({"loc": loc, "msg": f"unknown site {site!r}"})
        elif site not in wanted:
            errors.append({"loc": loc, "msg": f"site {site!r} is not among the fleet's sites"})
    for i, u in enumerate(fleet.user_regions):
        if u.site is not None and u.site not in full.site_index:
            errors.append({"loc": ["user_regions", i, "site"], "msg": f"unknown site {u.site!r}"})
    if errors:
        raise InvalidRequest(f"the fleet names unknown sites: {errors[0]['msg']}", errors=errors)

    keep = np.array(sorted(full.site_index[s] for s in dict.fromkeys(wanted)), dtype=np.int64)
    sites = [full.sites[i] for i in keep.tolist()]
    kept_ids = {s.id for s in sites}
    reserved = CapacityType.RESERVED
    pools = [p for p in full.pools if p.site in kept_ids and p.capacity_type != reserved]
    table = allocatable(build_pool_table(sites, pools), overhead)
    egress_raw = parts.egress[np.ix_(keep, keep)]
    internet = parts.internet_egress[keep]
    storage = parts.storage[keep]
    workloads = tuple(w.to_domain() for w in fleet.workloads)
    regions = tuple(UserRegion(u.name, u.lat, u.lon, u.site) for u in fleet.user_regions)
    rtt = {u.name: _rtt(parts.latency, sites, u) for u in regions}
    residency_ok, latency_ok = _site_masks(workloads, sites, rtt)
    hardware = _hardware_ok(workloads, table)
    return Market(
        table=table,
        workloads=workloads,
        user_rtt=rtt,
        egress=_egress(egress_raw, internet),
        egress_raw=egress_raw,
        internet_egress=internet,
        storage=storage,
        storage_hour=_storage_hour(workloads, storage),
        startup_s=np.array([node_startup_s(s.provider) for s in sites]),
        risk_month=_risk(table),
        residency_ok=residency_ok,
        latency_ok=latency_ok,
        feasible=_capacity_ok(workloads, table) & hardware & (residency_ok & latency_ok)[:, table.site_idx],
        hardware_ok=hardware,
        user_regions=regions,
        overhead=overhead,
    )


def _named_sites(fleet: FleetIn) -> list[tuple[list[Any], str]]:
    out: list[tuple[list[Any], str]] = [
        (["policies", "kube-default", "site"], fleet.policies.kube_default.site),
    ]
    if fleet.policies.karpenter_like is not None:
        out.append((["policies", "karpenter-like", "site"], fleet.policies.karpenter_like.site))
    ev = fleet.events
    if ev.spot_price_change is not None:
        out.append((["events", "spot_price_change", "region"], ev.spot_price_change.region))
    if ev.site_outage is not None:
        out.append((["events", "site_outage", "site"], ev.site_outage.site))
    return out


def _egress(raw: FloatArray, internet: FloatArray) -> FloatArray:
    """As the solver prices transfer (PlacementProblem.egress_matrix): internet egress where the
    pair has no price, nothing within a site."""
    m = np.where(np.isnan(raw), internet[:, None], raw)
    np.fill_diagonal(m, 0.0)
    return np.asarray(m, dtype=np.float64)


def _rtt(latency: LatencyModel, sites: Sequence[Site], u: UserRegion) -> FloatArray:
    """As Catalog.user_rtt gives it: the typical (p50) RTT from each site, 0 from the user's own site."""
    dst: str | tuple[float, float] = u.site if u.site is not None else (float(u.lat or 0.0), float(u.lon or 0.0))
    out = np.array(latency.rtt_from_sites([s.id for s in sites], dst), dtype=np.float64)
    for i, s in enumerate(sites):
        if s.id == dst:
            out[i] = 0.0
    return out


def _site_masks(
    workloads: Sequence[Workload], sites: Sequence[Site], rtt: Mapping[str, FloatArray]
) -> tuple[BoolArray, BoolArray]:
    res = np.ones((len(workloads), len(sites)), dtype=bool)
    lat = np.ones((len(workloads), len(sites)), dtype=bool)
    for k, w in enumerate(workloads):
        if w.residency is not None:
            res[k] = [w.residency.allows(s) for s in sites]
        if w.providers is not None:
            res[k] &= np.isin([s.provider for s in sites], list(w.providers))
        for region, slo in w.latency_slo_ms.items():
            lat[k] &= rtt[region] <= slo
    return res, lat


def _capacity_ok(workloads: Sequence[Workload], t: PoolTable) -> BoolArray:
    out = np.zeros((len(workloads), t.n_pools), dtype=bool)
    for k, w in enumerate(workloads):
        out[k] = np.isin(t.cap_idx, [CAPACITY_TYPES.index(c) for c in w.capacity_types])
    return out


def _hardware_ok(workloads: Sequence[Workload], t: PoolTable) -> BoolArray:
    out = np.zeros((len(workloads), t.n_pools), dtype=bool)
    for k, w in enumerate(workloads):
        ok = np.isin(t.arch_idx, [ARCHES.index(a) for a in w.arch])
        if w.gpus > 0:
            ok &= t.gpus >= w.gpus - 1e-9
            if w.gpu_model:
                ok &= t.gpu_model == w.gpu_model
        else:
            ok &= t.gpus == 0  # a GPU node for a CPU workload: no scheduler would pick it, no fleet pays for it
        out[k] = ok
    return out


def _storage_hour(workloads: Sequence[Workload], storage: FloatArray) -> FloatArray:
    out = np.zeros((len(workloads), storage.shape[0]))
    for k, w in enumerate(workloads):
        if w.storage_gib > 0:
            col = STORAGE_TIERS.index(w.storage_tier)
            out[k] = np.nan_to_num(storage[:, col] * w.storage_gib * GIB_IN_GB / HOURS_PER_MONTH)
    return out


def _risk(t: PoolTable) -> FloatArray:
    out = np.zeros(t.n_pools)
    spot = np.flatnonzero(t.cap_idx == SPOT)
    for p in spot.tolist():
        out[p] = interruption_risk_month(str(t.site_provider[t.site_idx[p]]), float(t.raw_vcpus[p]))
    return out
