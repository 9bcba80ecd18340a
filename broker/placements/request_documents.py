"""The placement request document (JSON over REST, JSON/YAML in the CLI): validation and the
domain request it becomes. The response is broker/placements/documents.py.

One definition serves the API (OpenAPI schema, validation) and the embedded
CLI, so both accept exactly the same documents.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic import Strict as StrictType

from broker.core.domain import (
    Arch,
    BurstablePolicy,
    CapacityType,
    Dependency,
    Objective,
    PlacementRequest,
    StorageTier,
    UserRegion,
    Workload,
)
from broker.core.latency import validate_geo
from broker.core.requirements import MAX_VALUES, Requirement, RequirementError
from broker.core.residency import resolve_policy
from broker.forecast.demand import DemandIn

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._\- ]*$")]
# numbers and flags as JSON types, nothing coerced: `replicas: true` is not 1, `cpu: "2"` not 2.0
# (an integer may not be 3.0 either; a number may be an integer)
Int = Annotated[int, StrictType()]
Num = Annotated[float, StrictType()]
Flag = Annotated[bool, StrictType()]
Percent = Annotated[str, Field(pattern=r"^([1-9][0-9]?|100)%$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ObjectiveIn(Strict):
    cost: Num = Field(1.0, ge=0)
    latency: Num = Field(0.0, ge=0)
    carbon: Num = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _some_weight(self) -> ObjectiveIn:
        if self.cost + self.latency + self.carbon <= 0:
            raise ValueError("at least one objective weight must be positive")
        return self


class UserRegionIn(Strict):
    name: Name
    lat: Num | None = Field(None, ge=-90, le=90)
    lon: Num | None = Field(None, ge=-180, le=180)
    site: str | None = None

    @model_validator(mode="after")
    def _one_location(self) -> UserRegionIn:
        has_geo = self.lat is not None and self.lon is not None
        if has_geo == (self.site is not None) or (self.lat is None) != (self.lon is None):
            raise ValueError("give either lat and lon, or site")
        if has_geo:
            validate_geo((float(self.lat or 0), float(self.lon or 0)))
        return self


class SpreadIn(Strict):
    min_sites: Int = Field(1, ge=1, le=100)
    # extension: a hard per-node limit the packing keeps and dispatch states (pod anti-affinity at 1)
    max_per_node: Int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="at most this many replicas of the workload on one node (extension; 1: one per node, "
        "dispatched as pod anti-affinity; more: a topology spread preference over nodes)",
    )


class DependencyIn(Strict):
    workload: Name
    gib_per_hour: Num = Field(ge=0, le=1e6)


class InlineResidency(Strict):
    allowed_countries: list[str] = Field(default_factory=list)
    denied_countries: list[str] = Field(default_factory=list)
    allowed_jurisdictions: list[str] = Field(default_factory=list)


class RequirementIn(Strict):
    """One instance requirement (Kubernetes NodeSelectorRequirement semantics; docs/solver.md)."""

    key: str = Field(
        min_length=1,
        max_length=120,
        description="a broker attribute (instance_family) or a well-known label (karpenter.k8s.aws/instance-family)",
    )
    operator: str = Field(description="In | NotIn | Exists | DoesNotExist | Gt | Lt")
    # Kubernetes writes values as strings; numbers and true/false are accepted as JSON types too
    values: list[StrictStr | StrictInt | StrictFloat | StrictBool] = Field(default_factory=list, max_length=MAX_VALUES)

    def texts(self) -> tuple[str, ...]:
        return tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in self.values)

    @model_validator(mode="after")
    def _valid(self) -> RequirementIn:
        try:
            self.to_domain()
        except RequirementError as exc:
            raise ValueError(str(exc)) from None
        return self

    def to_domain(self) -> Requirement:
        return Requirement.parse(self.key, self.operator, self.texts())


class WorkloadIn(Strict):
    name: Name
    replicas: Int = Field(ge=1, le=100_000)
    # floors of 1 millicore and ~1 MiB: smaller positive values overflowed the solver (a 5xx)
    cpu: Num = Field(ge=0.001, le=1024)
    memory_gib: Num = Field(ge=0.001, le=32_768)
    gpus: Num = Field(0, ge=0, le=64)
    gpu_model: str | None = Field(None, max_length=80)
    arch: list[Arch] = Field(default_factory=lambda: [Arch.AMD64], min_length=1)
    storage_gib: Num = Field(0, ge=0, le=1_000_000)
    storage_tier: StorageTier = StorageTier.SSD
    residency: str | InlineResidency | None = None
    latency_slo_ms: dict[str, Annotated[Num, Field(gt=0, le=10_000)]] = Field(default_factory=dict)
    spread: SpreadIn = Field(default_factory=SpreadIn)
    capacity_types: list[CapacityType] = Field(
        default_factory=lambda: [CapacityType.ONDEMAND, CapacityType.RESERVED], min_length=1
    )
    providers: list[str] | None = Field(None, min_length=1)
    depends_on: list[DependencyIn] = Field(default_factory=list)
    max_spot_fraction: Num | None = Field(None, ge=0, le=1)
    labels: dict[str, str] = Field(default_factory=dict)
    requirements: list[RequirementIn] = Field(
        default_factory=list,
        max_length=100,
        description="instance requirements, all must hold (extension; docs/solver.md, Instance requirements)",
    )
    demand: DemandIn | None = None  # size cpu/memory from a usage forecast (docs/forecast.md)
    burstable: BurstablePolicy = Field(
        BurstablePolicy.BASELINE,
        description="extension (docs/solver.md, Burstable nodes): baseline (default) places replicas on a "
        "burstable node only within its sustained baseline; allow at its full vCPUs; never keeps them off",
    )
    # extension (docs/dispatch.md): the migration scheduler's per-workload disruption budget
    max_unavailable: Annotated[int, StrictType(), Field(ge=1, le=100_000)] | Percent | None = Field(
        None,
        description="extension: at most this many of the workload's replicas starting or stopping at once "
        'during a migration, a count or "N%" of its replicas rounded up (default: the replan\'s disruption_budget)',
    )

    @field_validator("residency")
    @classmethod
    def _known_policy(cls, v: str | InlineResidency | None) -> str | InlineResidency | None:
        if v is not None:
            resolve_policy(v if isinstance(v, str) else v.model_dump())  # raises ValueError with the reason
        return v

    @field_validator("providers")
    @classmethod
    def _known_providers(cls, v: list[str] | None) -> list[str] | None:
        allowed = {"aws", "azure", "gcp", "private", "edge"}
        if v is not None:
            bad = sorted(set(v) - allowed)
            if bad:
                raise ValueError(f"unknown provider(s) {bad}; known: {sorted(allowed)}")
        return v

    def _defaulted(self, name: str, value: list[Any], every: list[Any]) -> list[Any]:
        """`arch` and `capacity_types` have defaults (amd64; on-demand and reserved). When the workload
        does not set one but a requirement names that attribute (kubernetes.io/arch,
        karpenter.sh/capacity-type), the requirement decides, as it would for Karpenter."""
        attribute = {"arch": "arch", "capacity_types": "capacity_type"}[name]
        if name not in self.model_fields_set and any(r.to_domain().attribute == attribute for r in self.requirements):
            return every
        return value

    def to_domain(self) -> Workload:
        res = None
        if self.residency is not None:
            res = resolve_policy(self.residency if isinstance(self.residency, str) else self.residency.model_dump())
        return Workload(
            name=self.name,
            replicas=self.replicas,
            cpu=self.cpu,
            memory_gib=self.memory_gib,
            gpus=self.gpus,
            gpu_model=self.gpu_model,
            arch=tuple(dict.fromkeys(self._defaulted("arch", self.arch, list(Arch)))),
            storage_gib=self.storage_gib,
            storage_tier=self.storage_tier,
            residency=res,
            latency_slo_ms=dict(self.latency_slo_ms),
            min_sites=self.spread.min_sites,
            max_per_node=self.spread.max_per_node,
            capacity_types=tuple(
                dict.fromkeys(self._defaulted("capacity_types", self.capacity_types, list(CapacityType)))
            ),
            providers=tuple(self.providers) if self.providers else None,
            depends_on=tuple(Dependency(d.workload, d.gib_per_hour) for d in self.depends_on),
            max_spot_fraction=self.max_spot_fraction,
            labels=dict(self.labels),
            requirements=tuple(r.to_domain() for r in self.requirements),
            burstable=self.burstable,
        )


class CurrentIn(Strict):
    """One row of the running placement: replicas of a workload on a pool."""

    workload: Name
    pool: str = Field(min_length=3, max_length=300)
    replicas: Int = Field(ge=1, le=100_000)


class PlacementRequestIn(Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: Name
    horizon_hours: Num = Field(730, gt=0, le=87_600)
    objective: ObjectiveIn = Field(default_factory=ObjectiveIn)
    user_regions: list[UserRegionIn] = Field(default_factory=list)
    workloads: list[WorkloadIn] = Field(min_length=1)
    dry_run: Flag = False
    # unset: the default budget for the request's size; either way capped by how it runs
    # (docs/operations.md, "Time a placement gets"); left out of the stored request when unset
    time_limit_s: Num | None = Field(
        None,
        gt=0,
        le=600,
        description="seconds the solver may run (extension: default grows with the number of workloads; "
        "capped at BROKER_SYNC_TIME_LIMIT_S for a synchronous answer, BROKER_ASYNC_TIME_LIMIT_S for a job)",
        exclude_if=lambda v: v is None,
    )
    # the same placement for the same request on any machine (docs/solver.md, "Work limits");
    # left out of the stored request when off
    reproducible: Flag = Field(
        False,
        description="extension: the solve ends on work limits (column-generation rounds, branch-and-bound "
        "nodes, neighbourhoods), not on the clock, so the same request gets the same placement on any machine "
        "and load while time_limit_s is not reached first (the answer then warns)",
        exclude_if=lambda v: not v,
    )
    # stability (docs/solver.md): re-plan moving only what pays off
    current: list[CurrentIn] = Field(default_factory=list)
    migration_cost_per_replica: Num = Field(0.0, ge=0, le=1_000_000)
    max_moves: Int | None = Field(None, ge=0)
    # which RTT statistic latency SLOs are checked against (docs/latency.md): the typical
    # round trip (median) or a conservative one that ~92 % of measured pairs stay under
    latency_quantile: Literal["p50", "p95"] = Field(
        "p50", description="RTT statistic for latency_slo_ms: p50 (typical, default) or p95 (conservative)"
    )
    # production service (docs/operations.md): budget scope, budget override, async job
    team: Name | None = None
    allow_over_budget: Flag = False
    async_: Flag = Field(False, alias="async", description="answer 202 with a job to poll")

    def to_domain(self) -> PlacementRequest:
        return PlacementRequest(
            name=self.name,
            workloads=tuple(w.to_domain() for w in self.workloads),
            user_regions=tuple(UserRegion(u.name, u.lat, u.lon, u.site) for u in self.user_regions),
            horizon_hours=self.horizon_hours,
            objective=Objective(self.objective.cost, self.objective.latency, self.objective.carbon),
            dry_run=self.dry_run,
            time_limit_s=self.time_limit_s,
            reproducible=self.reproducible,
            current=tuple((c.workload, c.pool, c.replicas) for c in self.current),
            migration_cost_per_replica=self.migration_cost_per_replica,
            max_moves=self.max_moves,
            latency_quantile=self.latency_quantile,
        )
