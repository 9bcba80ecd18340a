"""The placement request and response documents (JSON over REST, JSON/YAML in the CLI).

One definition serves the API (OpenAPI schema, validation) and the embedded
CLI, so both accept and print exactly the same documents.
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
    Assignment,
    Baseline,
    CapacityType,
    Dependency,
    Explanation,
    NodeAllocation,
    NodeAssignment,
    NodeReplicas,
    Objective,
    PackingReport,
    PlacementRequest,
    StorageTier,
    UserRegion,
    Workload,
)
from broker.core.latency import validate_geo
from broker.core.placement import BudgetFigure, Placement, PriceSnapshot
from broker.core.requirements import MAX_VALUES, Requirement, RequirementError
from broker.core.residency import resolve_policy
from broker.forecast.demand import DemandIn, RightsizingOut

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
            current=tuple((c.workload, c.pool, c.replicas) for c in self.current),
            migration_cost_per_replica=self.migration_cost_per_replica,
            max_moves=self.max_moves,
            latency_quantile=self.latency_quantile,
        )


# ---- response ---------------------------------------------------------------------


class PreferredOverOut(BaseModel):
    """A home the constraints allow that costs less alone, passed over for the whole plan."""

    pool: str
    saving_per_hour: float = Field(description="what these replicas would cost less there, alone (USD/h, > 0)")
    because: list[str] = Field(description="what couples this choice to the rest of the plan")


class ExplanationOut(BaseModel):
    cost_per_hour: float
    binding: list[str]
    next_best: str | None = Field(
        description="the cheapest pool at another site the constraints allow that costs alone at least what "
        "this pool does (the runner-up)"
    )
    # no `ge=0` here: placements stored before this definition carry negative values and are still served
    next_best_extra_per_hour: float | None = Field(None, description="what next_best would cost more (>= 0)")
    cost_breakdown: dict[str, float] = Field(default_factory=dict)
    # left out when empty, so placements stored before it existed read back exactly as stored
    preferred_over: PreferredOverOut | None = Field(None, exclude_if=lambda v: v is None)

    @classmethod
    def from_domain(cls, e: Explanation) -> ExplanationOut:
        return cls.model_validate(e, from_attributes=True)


class AssignmentOut(BaseModel):
    workload: str
    pool: str
    site: str
    replicas: int
    latency_ms: dict[str, float]
    explanation: ExplanationOut
    # per SLO of the workload: its bound minus the RTT from this site (ms, in latency_quantile)
    latency_slo_margin_ms: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def from_domain(cls, a: Assignment) -> AssignmentOut:
        return cls.model_validate(a, from_attributes=True)


class NodeOut(BaseModel):
    pool: str
    count: int
    cost_per_hour: float

    @classmethod
    def from_domain(cls, n: NodeAllocation) -> NodeOut:
        return cls.model_validate(n, from_attributes=True)


class NodeReplicasOut(BaseModel):
    workload: str
    replicas: int
    cpu: float = Field(description="cpu each replica requests")
    memory_gib: float = Field(description="memory each replica requests")
    gpus: float = 0.0

    @classmethod
    def from_domain(cls, r: NodeReplicas) -> NodeReplicasOut:
        return cls(workload=r.workload, replicas=r.replicas, cpu=r.cpu, memory_gib=r.memory_gib, gpus=r.gpus)


class NodeAssignmentOut(BaseModel):
    """Extension: one node of a pool and the replicas it runs (docs/solver.md, exact packing)."""

    pool: str
    node: int = Field(description="index of the node in its pool, 0 to the pool's count - 1 in `nodes`")
    replicas: list[NodeReplicasOut]

    @classmethod
    def from_domain(cls, n: NodeAssignment) -> NodeAssignmentOut:
        return cls(pool=n.pool, node=n.node, replicas=[NodeReplicasOut.from_domain(r) for r in n.replicas])


class PackingOut(BaseModel):
    """Extension: what packing every replica onto a concrete node changed in the aggregate answer."""

    aggregate_nodes: int = Field(description="nodes the aggregate capacity rule counts")
    nodes: int = Field(description="nodes the packing uses: the sum of `nodes[].count`")
    aggregate_cost_per_hour: float = Field(description="the plan's cost before packing")
    aggregate_gap_pct: float = Field(description="the gap before packing, against the same lower bound")
    moved_replicas: int = Field(description="replicas moved off owned pools whose nodes could not hold them")
    pools: int
    pools_proven: int = Field(description="pools whose node count no packing beats")
    pools_cp_sat: int = Field(description="pools CP-SAT ran on (first-fit decreasing not proven minimal)")
    pools_cp_sat_better: int = Field(description="pools where CP-SAT used fewer nodes than first-fit decreasing")
    ffd_nodes: int = Field(description="nodes first-fit decreasing alone would have used")
    packing_ms: int

    @classmethod
    def from_domain(cls, p: PackingReport) -> PackingOut:
        return cls(
            aggregate_nodes=p.aggregate_nodes,
            nodes=p.nodes,
            aggregate_cost_per_hour=p.aggregate_cost_per_hour,
            aggregate_gap_pct=p.aggregate_gap_pct,
            moved_replicas=p.moved_replicas,
            pools=p.pools,
            pools_proven=p.pools_proven,
            pools_cp_sat=p.pools_cp_sat,
            pools_cp_sat_better=p.pools_cp_sat_better,
            ffd_nodes=p.ffd_nodes,
            packing_ms=p.packing_ms,
        )


class BaselineOut(BaseModel):
    """What the placement is compared with (the contract's `baseline`; `description` is an extension)."""

    policy: str = Field(
        description="the baseline policy: `kubernetes-packer` (what the user would otherwise run: "
        "kube-scheduler-style packing with a cluster autoscaler over every pool the request allows), "
        "`placement-in-force` (a re-plan: the placement running now), `kubernetes-packer-home-cloud` (the "
        "same packer on the home cloud, on-demand, declared requests), `greedy-cheapest-fit` (each "
        "workload alone on its cheapest offer; the headline of placements stored before the extension)"
    )
    cost_per_hour: float | None = Field(
        description="USD/h of the baseline's placement; null: it could not place the request"
    )
    # extension; left out when empty, so placements stored before it existed read back exactly as stored
    description: str = Field("", description="extension: what the baseline is", exclude_if=lambda v: not v)

    @classmethod
    def from_domain(cls, b: Baseline) -> BaselineOut:
        return cls(policy=b.policy, cost_per_hour=b.cost_per_hour, description=b.description)


class BaselineFigureOut(BaselineOut):
    savings_pct: float | None = Field(description="(1 - cost_per_hour of the placement / this baseline's) x 100")

    @classmethod
    def figure(cls, b: Baseline, cost_per_hour: float) -> BaselineFigureOut:
        return cls(**BaselineOut.from_domain(b).model_dump(), savings_pct=b.savings_pct(cost_per_hour))


class PoolPriceOut(BaseModel):
    price_per_hour: float
    price_source: str
    price_as_of: str


class PriceSnapshotOut(BaseModel):
    """The catalog version and each used pool's price, source and date; stale_pools older than the limit."""

    catalog_version: str
    pools: dict[str, PoolPriceOut]
    stale_after_days: float
    stale_pools: list[str]

    @classmethod
    def from_domain(cls, p: PriceSnapshot) -> PriceSnapshotOut:
        return cls(
            catalog_version=p.catalog_version,
            pools={
                pid: PoolPriceOut(price_per_hour=x.price_per_hour, price_source=x.source, price_as_of=x.as_of)
                for pid, x in p.pools.items()
            },
            stale_after_days=p.stale_after_days,
            stale_pools=p.stale_pools,
        )


class BudgetOut(BaseModel):
    """One budget this placement counts against: USD per month, as it stood when it was placed."""

    team: str | None
    monthly_usd: float
    used: float
    this_placement: float
    projected: float
    remaining: float
    over: bool

    @classmethod
    def from_domain(cls, b: BudgetFigure) -> BudgetOut:
        return cls.model_validate(b, from_attributes=True)


class PlacementOut(BaseModel):
    id: str | None = None
    name: str = ""
    created_at: str | None = None
    status: Literal["optimal", "feasible", "infeasible"]
    objective_value: float
    cost_per_hour: float
    cost_per_month: float
    lower_bound_per_hour: float
    gap_pct: float
    baseline: BaselineOut = Field(
        description="the headline baseline, what the user would otherwise run: `kubernetes-packer` "
        "(kube-scheduler-style packing with a cluster autoscaler over every pool the request allows: the "
        "strictest packer to compare with), or for a re-plan `placement-in-force` (the running placement "
        "kept as it is); placements stored before this extension name `greedy-cheapest-fit`"
    )
    savings_pct: float | None = Field(
        description="(1 - cost_per_hour / baseline.cost_per_hour) x 100, rounded to 0.01; null without a baseline cost"
    )
    # extension: every baseline priced, the headline first, each with its savings; left out when
    # empty (placements stored before it existed read back exactly as stored)
    baselines: list[BaselineFigureOut] = Field(
        default_factory=list,
        description="extension: every baseline priced, `baseline` first, then `kubernetes-packer` (for a "
        "re-plan), `kubernetes-packer-home-cloud` and `greedy-cheapest-fit`, each with its savings_pct",
        exclude_if=lambda v: not v,
    )
    solve_ms: int
    nodes: list[NodeOut]
    assignments: list[AssignmentOut]
    egress_cost_per_hour: float
    storage_cost_per_hour: float
    latency_quantile: Literal["p50", "p95"] = "p50"  # the statistic of every latency_ms and margin
    rejected: dict[str, dict[str, int]] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    price_as_of: dict[str, str] = Field(default_factory=dict)
    price_snapshot: PriceSnapshotOut | None = None
    rightsizing: RightsizingOut | None = None
    budget: list[BudgetOut] | None = None  # the tenant's budgets this placement counts against
    # extension (exact packing): left out when empty or null (placements stored before it), so they
    # read back exactly as stored
    node_assignments: list[NodeAssignmentOut] = Field(
        default_factory=list,
        exclude_if=lambda v: not v,
        description="every replica on a concrete node of its pool, per pool in the order of `nodes`, "
        "nodes numbered from 0; the node count per pool equals `nodes[].count` and no node holds more "
        "cpu, memory or GPUs than one node of the pool schedules (extension)",
    )
    packing: PackingOut | None = Field(
        None,
        exclude_if=lambda v: v is None,
        description="what exact packing changed against the aggregate capacity rule (extension); "
        "null for placements stored before it",
    )
    # how long the solver could run and why it stopped; left out for placements stored before
    # they were recorded, so those read back exactly as stored
    time_limit_s: float | None = Field(
        None,
        description="extension: the time limit the solver was given (s): the request's time_limit_s or the "
        "default for its size, within the cap for synchronous or asynchronous placements; solve_ms says how "
        "long it ran",
        exclude_if=lambda v: v is None,
    )
    stop_reason: Literal["optimal", "gap_target", "time_limit", "stall"] | None = Field(
        None,
        description="extension: why the solver stopped: optimal (gap <= 0.01 %), gap_target (the 1 % target "
        "gap proven), time_limit (the time ran out first), stall (the search had nothing left to try well "
        "before its time ran out); an infeasible request's 422 problem document says infeasible",
        exclude_if=lambda v: v is None,
    )

    @classmethod
    def from_domain(cls, p: Placement) -> PlacementOut:
        """The response document of the contract for a placement (stored or a dry run)."""
        r = p.result
        return cls(
            id=p.id,
            name=p.name,
            created_at=p.created_at.isoformat() if p.created_at else None,
            status=r.status,
            objective_value=r.objective_value,
            cost_per_hour=r.cost_per_hour,
            cost_per_month=p.cost_per_month,
            lower_bound_per_hour=r.lower_bound_per_hour,
            gap_pct=r.gap_pct,
            baseline=BaselineOut.from_domain(r.baseline),
            savings_pct=r.savings_pct,
            baselines=[BaselineFigureOut.figure(b, r.cost_per_hour) for b in r.baselines],
            solve_ms=r.solve_ms,
            nodes=[NodeOut.from_domain(n) for n in r.nodes],
            assignments=[AssignmentOut.from_domain(a) for a in r.assignments],
            egress_cost_per_hour=r.egress_cost_per_hour,
            storage_cost_per_hour=r.storage_cost_per_hour,
            latency_quantile=p.latency_quantile,
            rejected={k: dict(v) for k, v in r.rejected.items()},
            warnings=list(r.warnings),
            price_as_of=dict(p.price_as_of),
            price_snapshot=PriceSnapshotOut.from_domain(p.prices) if p.prices else None,
            rightsizing=RightsizingOut.from_domain(p.rightsizing) if p.rightsizing else None,
            budget=[BudgetOut.from_domain(b) for b in p.budget] if p.budget is not None else None,
            node_assignments=[NodeAssignmentOut.from_domain(n) for n in r.node_assignments],
            packing=PackingOut.from_domain(r.packing) if r.packing else None,
            time_limit_s=r.time_limit_s,
            stop_reason=r.stop_reason,
        )


def placement_document(p: Placement) -> dict[str, Any]:
    """The response document as JSON data, for the CLI and job results (the API serialises PlacementOut)."""
    return PlacementOut.from_domain(p).model_dump(mode="json")
