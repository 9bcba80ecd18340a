"""The fleet document a simulation replays (docs/simulate.md): tenants, workloads, usage, events.

One definition serves the CLI (YAML/JSON file) and the API (`POST /v1/simulations`). A fleet
workload is a placement-request workload (same fields, same validation) plus its tenant and
the source of its usage. Validation that needs the catalog or the traces (unknown sites or
series, history too short) happens where those are known: `broker.simulate.usage` and
`broker.simulate.market`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from broker.core.domain import CapacityType
from broker.errors import InvalidRequest
from broker.placements.request_documents import Name, UserRegionIn, WorkloadIn
from broker.solver.options import WorkLimits

STEP_S = 300  # the simulation's step: usage traces are 5-minute samples
STEPS_PER_DAY = 86_400 // STEP_S
MIN_DAYS = STEP_S / 86_400  # a run replays at least one step
Pct = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def at_least_one_step(days: float) -> float:
    """A simulation's length: one 5-minute step at least (a shorter run replays nothing)."""
    if not days >= MIN_DAYS:
        raise ValueError(f"must be at least one 5-minute step ({MIN_DAYS:.5f} days), not {days:g}")
    return days


Days = Annotated[float, Field(le=366, allow_inf_nan=False), AfterValidator(at_least_one_step)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TenantIn(Strict):
    name: Name
    weight: float = Field(1.0, gt=0, le=1_000)


class UsageIn(Strict):
    """Where a workload's usage comes from.

    `series`: a bundled trace (`pricing/snapshot/usage_traces.csv.gz`, or the fleet's own
    `traces` file) in percent of a VM's capacity. `scale: peak` (default) maps the series'
    highest value over the whole trace to `peak` x the workload's declared total request
    (cpu x replicas): the team sized its requests to the peak it saw. `scale: capacity` reads
    the percent as a share of the declared request as it is. Memory follows the series' own
    memory column when the trace has one (Bitbrains), else `memory_fraction` of the request.

    `cpu` / `memory_gib`: inline totals across replicas (cores, GiB), one value per 5-minute
    step from the start of the history.
    """

    series: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    scale: Literal["peak", "capacity"] = "peak"
    peak: float = Field(1.0, gt=0, le=10)
    memory_fraction: float = Field(0.6, ge=0, le=10)
    cpu: Annotated[list[Pct], Field(min_length=1, max_length=1_000_000)] | None = None
    memory_gib: Annotated[list[Pct], Field(min_length=1, max_length=1_000_000)] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> UsageIn:
        if (self.series is None) == (self.cpu is None):
            raise ValueError("give either series (a usage trace) or cpu (inline values)")
        if self.memory_gib is not None and self.cpu is None:
            raise ValueError("inline memory_gib needs inline cpu")
        return self


class FleetWorkloadIn(WorkloadIn):
    tenant: Name = "default"
    usage: UsageIn

    @model_validator(mode="after")
    def _no_demand(self) -> FleetWorkloadIn:
        if self.demand is not None:
            raise ValueError("demand: a fleet workload's usage is `usage`; the broker policy forecasts from it")
        return self


class SpotInterruptionsIn(Strict):
    enabled: bool = True
    # multiplies every pool's monthly risk (broker/solver/answer/risk.py): 1 = the providers' typical rates
    risk_multiplier: float = Field(1.0, ge=0, le=1_000)


class PriceChangeIn(Strict):
    enabled: bool = True
    at_hours: float = Field(ge=0)
    region: str = Field(min_length=3, description="a site id, e.g. aws:us-east-1")
    capacity_type: CapacityType = CapacityType.SPOT
    factor: float = Field(gt=0, le=100)


class OutageIn(Strict):
    enabled: bool = True
    at_hours: float = Field(ge=0)
    hours: float = Field(gt=0)
    site: str = Field(min_length=3)


class SurgeIn(Strict):
    """A day of demand `factor` x the trace; workloads scale their replicas out by the same factor."""

    enabled: bool = True
    day: int = Field(ge=0, description="day of the simulation, 0 = the first")
    hours: float = Field(24.0, gt=0, le=24 * 14)
    factor: float = Field(gt=0, le=20)
    workloads: list[Name] | None = None  # None: every workload


class EventsIn(Strict):
    spot_interruptions: SpotInterruptionsIn = Field(default_factory=SpotInterruptionsIn)
    spot_price_change: PriceChangeIn | None = None
    site_outage: OutageIn | None = None
    surge: SurgeIn | None = None


class KubeDefaultIn(Strict):
    site: str = Field(min_length=3)
    instance_type: str = Field(min_length=1)
    scale_down_utilization: float = Field(0.5, ge=0, le=1)  # cluster-autoscaler's default
    scale_down_unneeded_minutes: float = Field(10.0, ge=0)


class KarpenterIn(Strict):
    site: str = Field(min_length=3)
    consolidate_after_minutes: float = Field(5.0, ge=0)
    budget_pct: float = Field(10.0, gt=0, le=100)  # Karpenter's default disruption budget: 10 % of nodes
    instance_categories: list[str] = Field(default_factory=lambda: ["c", "m", "r"], min_length=1)


class CheapestFitIn(Strict):
    pass


class WorkLimitsIn(Strict):
    """The broker's solves end on work, not on the clock (broker.solver.WorkLimits)."""

    cg_rounds: int = Field(WorkLimits.cg_rounds, ge=1, le=1_000)
    mip_nodes: int = Field(WorkLimits.mip_nodes, ge=1, le=1_000_000)
    lns_turns: int = Field(WorkLimits.lns_turns, ge=0, le=1_000)
    packing_s: float = Field(WorkLimits.packing_s, ge=0, le=60)


class BrokerPolicyIn(Strict):
    replan_hours: float = Field(12.0, gt=0)
    headroom_pct: float = Field(20.0, ge=0, le=400)
    # per workload, the headroom that covered the peak of a held-out horizon (policies/sizing.py)
    calibrate_headroom: bool = True
    forecast_hours: float = Field(24.0, gt=0, le=24 * 7)
    payback_hours: float = Field(24.0, gt=0)
    min_saving_pct: float = Field(5.0, ge=0, le=100)
    disruption_budget: int = Field(20, ge=1)
    forecast: Literal["xgboost", "baseline"] = "xgboost"
    # with work limits (the default) each solve ends on its work, so a replay's figures do not
    # depend on the machine's speed or load, and time_limit_s only guards against a runaway;
    # `work_limits: null`: each solve gets time_limit_s of the clock, its best answer by then
    work_limits: WorkLimitsIn | None = Field(default_factory=WorkLimitsIn)
    time_limit_s: float = Field(60.0, gt=0, le=600)
    # replicas left waiting for a node to start run at once on a ready node whose recent use
    # leaves room for theirs x (1 + bridge_margin_pct), then move make-before-break (policies/bridge.py)
    bridge: bool = True
    bridge_margin_pct: float = Field(50.0, ge=0, le=400)
    # each replica on a node that holds its declared request, so a burst past the forecast meets
    # the node's idle cores (policies/broker.py); off: any node that holds the sized request
    burst_room: bool = True
    # each workload sized below its declared request (burst-prone: it may burst back to it) runs
    # at most one replica per node, so one workload's replicas never burst together on a node
    # and a node's bursts come from independent workloads (policies/broker.py)
    burst_spread: bool = True
    # every node the broker's solves launch has at least this many vCPUs (0: any size)
    min_node_vcpus: float = Field(0.0, ge=0, le=512)


class PoliciesIn(Strict):
    kube_default: KubeDefaultIn = Field(alias="kube-default")
    karpenter_like: KarpenterIn | None = Field(None, alias="karpenter-like")
    cheapest_fit: CheapestFitIn = Field(default_factory=CheapestFitIn, alias="cheapest-fit")
    broker: BrokerPolicyIn = Field(default_factory=BrokerPolicyIn)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_policies(cls, data: Any) -> Any:
        """An unknown policy says which exist, as `--policies` does (not "extra inputs")."""
        if isinstance(data, dict):
            known = {f.alias or name for name, f in cls.model_fields.items()}
            unknown = sorted(str(k) for k in data if k not in known and k not in cls.model_fields)
            if unknown:
                raise ValueError(f"unknown policy {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return data


class CostsIn(Strict):
    migration_per_replica: float = Field(0.01, ge=0, le=1_000)


class FleetIn(Strict):
    name: Name
    start_day: int = Field(7, ge=0, description="simulated time starts this many days into the usage history")
    days: Days = 2.0
    seed: int = 0
    traces: str | None = Field(None, description="a trace file beside the fleet file (CLI only)")
    sites: list[str] | None = Field(None, min_length=1)  # the sites any policy may use; None: every public site
    tenants: list[TenantIn] = Field(default_factory=lambda: [TenantIn(name="default")], min_length=1)
    user_regions: list[UserRegionIn] = Field(default_factory=list)
    workloads: list[FleetWorkloadIn] = Field(min_length=1)
    policies: PoliciesIn
    costs: CostsIn = Field(default_factory=CostsIn)
    events: EventsIn = Field(default_factory=EventsIn)


def references(fleet: FleetIn) -> list[dict[str, Any]]:
    """Names that must point at something declared in the same document."""
    errors: list[dict[str, Any]] = []
    tenants = [t.name for t in fleet.tenants]
    names = [w.name for w in fleet.workloads]
    regions = {u.name for u in fleet.user_regions}
    if len(set(tenants)) != len(tenants):
        errors.append({"loc": ["tenants"], "msg": "tenant names must be unique"})
    seen: set[str] = set()
    for i, w in enumerate(fleet.workloads):
        loc = ["workloads", i]
        if w.name in seen:
            errors.append({"loc": [*loc, "name"], "msg": f"duplicate workload name {w.name!r}"})
        seen.add(w.name)
        if w.tenant not in tenants:
            errors.append({"loc": [*loc, "tenant"], "msg": f"unknown tenant {w.tenant!r}"})
        for j, d in enumerate(w.depends_on):
            if d.workload not in names or d.workload == w.name:
                errors.append({"loc": [*loc, "depends_on", j, "workload"], "msg": f"unknown workload {d.workload!r}"})
        for r in w.latency_slo_ms:
            if r not in regions:
                errors.append({"loc": [*loc, "latency_slo_ms", r], "msg": f"user region {r!r} is not declared"})
    surge = fleet.events.surge
    for j, n in enumerate(surge.workloads or [] if surge else []):
        if n not in names:
            errors.append({"loc": ["events", "surge", "workloads", j], "msg": f"unknown workload {n!r}"})
    return errors


def parse_fleet(doc: Any) -> FleetIn:
    """A validated fleet, or InvalidRequest whose errors name each offending field."""
    if not isinstance(doc, dict):
        raise InvalidRequest("a fleet must be a JSON/YAML object", errors=[{"loc": ["fleet"], "msg": "not an object"}])
    try:
        fleet = FleetIn.model_validate(doc)
    except ValidationError as exc:
        errors = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_context=False)
        ]
        raise InvalidRequest("the fleet is invalid: " + _summary(errors), errors=errors) from exc
    errors = references(fleet)
    if errors:
        raise InvalidRequest("the fleet is invalid: " + _summary(errors), errors=errors)
    return fleet


def _summary(errors: list[dict[str, Any]]) -> str:
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}{more}"
