"""API response shapes for the catalog. Placement documents live in broker.placements.documents
(shared with the CLI); these are built from domain objects with from_domain()."""

from __future__ import annotations

from pydantic import BaseModel, Field

from broker.core.domain import Pool, ResidencyPolicy, Site
from broker.core.placement import PlacementSummary as PlacementSummaryRecord


class SiteOut(BaseModel):
    id: str
    provider: str
    kind: str
    region: str
    name: str
    country: str
    jurisdictions: list[str]
    lat: float | None
    lon: float | None
    carbon_g_per_kwh: float | None

    @classmethod
    def from_domain(cls, s: Site) -> SiteOut:
        return cls(
            id=s.id,
            provider=s.provider,
            kind=s.kind.value,
            region=s.region,
            name=s.name,
            country=s.country,
            jurisdictions=list(s.jurisdictions),
            lat=s.lat,
            lon=s.lon,
            carbon_g_per_kwh=s.carbon_g_per_kwh,
        )


class PoolOut(BaseModel):
    id: str
    site: str
    instance_type: str
    capacity_type: str
    arch: str
    vcpus: float
    memory_gib: float
    gpus: float
    gpu_model: str | None
    price_per_hour: float
    max_nodes: int | None
    price_source: str
    price_as_of: str
    attributes: dict[str, str | bool | int | float] | None = Field(
        None,
        description=(
            "the pool's well-known attributes that instance requirements match (extension; docs/solver.md, "
            "Instance requirements); unknown ones are left out. Always on GET /v1/pools/{id}; in listings "
            "when a selector is given"
        ),
    )

    # extension: what pods can request on one node (docs/solver.md, "Allocatable capacity");
    # vcpus and memory_gib stay the instance's raw size
    allocatable_vcpus: float | None = Field(
        None, description="vCPUs pods can request on one node: raw size minus the provider's reservations, DaemonSets"
    )
    allocatable_memory_gib: float | None = Field(
        None,
        description="GiB pods can request on one node: raw size minus reservations, eviction threshold and DaemonSets",
    )

    @classmethod
    def from_domain(
        cls,
        p: Pool,
        attributes: dict[str, str | bool | int | float] | None = None,
        allocatable: tuple[float, float] | None = None,
    ) -> PoolOut:
        return cls(
            attributes=attributes,
            id=p.id,
            site=p.site,
            instance_type=p.instance_type,
            capacity_type=p.capacity_type.value,
            arch=p.arch.value,
            vcpus=p.vcpus,
            memory_gib=p.memory_gib,
            gpus=p.gpus,
            gpu_model=p.gpu_model,
            price_per_hour=p.price_per_hour,
            max_nodes=p.max_nodes,
            price_source=p.price_source,
            price_as_of=p.price_as_of,
            allocatable_vcpus=None if allocatable is None else round(allocatable[0], 4),
            allocatable_memory_gib=None if allocatable is None else round(allocatable[1], 4),
        )


class PoolPage(BaseModel):
    items: list[PoolOut]
    total: int
    limit: int
    offset: int


class PolicyOut(BaseModel):
    name: str
    description: str
    allowed_countries: list[str]
    denied_countries: list[str]
    allowed_jurisdictions: list[str]

    @classmethod
    def from_domain(cls, p: ResidencyPolicy) -> PolicyOut:
        return cls(
            name=p.name,
            description=p.description,
            allowed_countries=sorted(p.allowed_countries),
            denied_countries=sorted(p.denied_countries),
            allowed_jurisdictions=sorted(p.allowed_jurisdictions),
        )


class PlacementSummary(BaseModel):
    id: str
    name: str
    created_at: str
    status: str
    cost_per_hour: float
    baseline_cost_per_hour: float | None
    savings_pct: float | None

    @classmethod
    def from_domain(cls, p: PlacementSummaryRecord) -> PlacementSummary:
        return cls(
            id=p.id,
            name=p.name,
            created_at=p.created_at.isoformat(),
            status=p.status,
            cost_per_hour=p.cost_per_hour,
            baseline_cost_per_hour=p.baseline_cost_per_hour,
            savings_pct=p.savings_pct,
        )


class PlacementPage(BaseModel):
    items: list[PlacementSummary]
    total: int
    limit: int
    offset: int
