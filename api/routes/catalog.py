"""Catalog endpoints: sites, pools, residency policies (latency: api/routes/latency.py)."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Query

from api.deps import get_broker
from api.paging import Offset
from api.schemas import PolicyOut, PoolOut, PoolPage, SiteOut
from broker.app import Broker
from broker.core.allocatable import NodeOverhead, allocatable_capacity
from broker.core.domain import CapacityType
from broker.core.pooltable import CAPACITY_TYPES, PoolTable
from broker.core.requirements import Requirement, RequirementError
from broker.core.residency import BUILTIN_POLICIES
from broker.core.selector import clauses, parse_clause
from broker.errors import InvalidRequest, NotFound

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get("/sites", response_model=list[SiteOut])
def list_sites(
    broker: Annotated[Broker, Depends(get_broker)],
    provider: str | None = None,
    kind: str | None = None,
    country: str | None = None,
) -> list[SiteOut]:
    sites = broker.catalog().sites.values()
    return [
        SiteOut.from_domain(s)
        for s in sites
        if (provider is None or s.provider == provider)
        and (kind is None or s.kind == kind)
        and (country is None or s.country == country.upper())
    ]


@router.get("/pools", response_model=PoolPage)
def list_pools(
    broker: Annotated[Broker, Depends(get_broker)],
    site: str | None = None,
    provider: str | None = None,
    capacity_type: CapacityType | None = None,
    instance_type: str | None = None,
    min_vcpus: Annotated[float | None, Query(ge=0)] = None,
    min_memory_gib: Annotated[float | None, Query(ge=0)] = None,
    min_gpus: Annotated[float | None, Query(ge=0)] = None,
    arch: str | None = None,
    selector: Annotated[
        str | None,
        Query(
            max_length=4000,
            description=(
                "instance requirements as a Kubernetes label selector over the pool attributes "
                "(extension; docs/solver.md, Instance requirements), e.g. "
                "`karpenter.k8s.aws/instance-family in (m7i,m7a),instance-generation>5,!gpu_name`"
            ),
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> PoolPage:
    cat = broker.catalog()
    t = cat.table
    ok = np.ones(t.n_pools, dtype=bool)
    for req in _selector(selector):
        ok &= t.attributes.mask(req)
    if site is not None:
        if site not in t.site_index:
            raise NotFound(f"site {site!r} does not exist")
        ok &= t.site_idx == t.site_index[site]
    if provider is not None:
        ok &= t.provider_mask([provider])
    if capacity_type is not None:
        ok &= t.cap_idx == CAPACITY_TYPES.index(capacity_type)
    if min_vcpus is not None:
        ok &= t.vcpus >= min_vcpus
    if min_memory_gib is not None:
        ok &= t.memory_gib >= min_memory_gib
    if min_gpus is not None:
        ok &= t.gpus >= min_gpus
    idx = np.flatnonzero(ok)
    pools = [t.pools[i] for i in idx]
    if arch is not None:
        pools = [p for p in pools if p.arch == arch]
    if instance_type is not None:
        pools = [p for p in pools if p.instance_type == instance_type]
    page = pools[offset : offset + limit]
    attrs = t.attributes if selector is not None else None  # built on first use: listings without one skip it
    alloc = _allocatable(t, [t.pool_index[p.id] for p in page], broker.settings.node_overhead())
    items = [
        PoolOut.from_domain(p, attrs.of(t.pool_index[p.id]) if attrs else None, a)
        for p, a in zip(page, alloc, strict=True)
    ]
    return PoolPage(items=items, total=len(pools), limit=limit, offset=offset)


def _selector(selector: str | None) -> list[Requirement]:
    if selector is None:
        return []
    out: list[Requirement] = []
    errors: list[dict[str, Any]] = []
    for i, clause in enumerate(clauses(selector)):
        try:
            out.append(parse_clause(clause))
        except RequirementError as exc:
            errors.append({"loc": ["query", "selector", i], "msg": str(exc), "type": "value_error"})
    if errors:
        raise InvalidRequest(str(errors[0]["msg"]), errors)
    return out


def _allocatable(t: PoolTable, idx: list[int], overhead: NodeOverhead) -> list[tuple[float, float]]:
    """Per listed pool, what pods can request on one of its nodes (as the solver counts it)."""
    i = np.array(idx, dtype=np.int64)
    cpu, mem = allocatable_capacity(
        t.raw_vcpus[i], t.raw_memory_gib[i], t.reserved_vcpus[i], t.reserved_memory_gib[i], overhead
    )
    return list(zip(cpu.tolist(), mem.tolist(), strict=True))


@router.get("/pools/{pool_id:path}", response_model=PoolOut)
def get_pool(pool_id: str, broker: Annotated[Broker, Depends(get_broker)]) -> PoolOut:
    t = broker.catalog().table
    i = t.pool_index.get(pool_id)
    if i is None:
        raise NotFound(f"pool {pool_id!r} does not exist")
    return PoolOut.from_domain(t.pools[i], t.attributes.of(i), _allocatable(t, [i], broker.settings.node_overhead())[0])


@router.get("/policies", response_model=list[PolicyOut])
def policies() -> list[PolicyOut]:
    return [PolicyOut.from_domain(p) for p in BUILTIN_POLICIES.values()]
