"""Domain types shared by the solver, the catalog, the store and the API.

Frozen dataclasses, no I/O. Money is USD per hour as float at this level
(the catalog's decimal strings round-trip exactly); the solver converts to
integer micro-dollars where it needs exact arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from broker.core.requirements import Requirement


class CapacityType(StrEnum):
    ONDEMAND = "ondemand"
    SPOT = "spot"
    RESERVED = "reserved"


class SiteKind(StrEnum):
    PUBLIC = "public"
    PRIVATE = "private"
    EDGE = "edge"


class Arch(StrEnum):
    AMD64 = "amd64"
    ARM64 = "arm64"


class StorageTier(StrEnum):
    STANDARD = "standard"
    SSD = "ssd"
    PREMIUM = "premium"


class BurstablePolicy(StrEnum):
    """Where a workload may run on burstable nodes (docs/solver.md, "Burstable nodes")."""

    BASELINE = "baseline"  # only within the nodes' sustained baseline (the default)
    ALLOW = "allow"  # at their full vCPUs, spending (or buying) credits
    NEVER = "never"  # not on burstable nodes at all


HOURS_PER_MONTH = 730.0


@dataclass(frozen=True, slots=True)
class Site:
    id: str  # "aws:eu-central-1", "private:fra-dc1", "edge:munich-store-17"
    provider: str  # aws | azure | gcp | private | edge
    kind: SiteKind
    region: str
    country: str  # ISO 3166-1 alpha-2
    jurisdictions: tuple[str, ...]
    lat: float | None
    lon: float | None
    carbon_g_per_kwh: float | None = None
    name: str = ""


@dataclass(frozen=True, slots=True)
class Pool:
    id: str  # "<site>/<instance-type>/<capacity-type>"
    site: str
    instance_type: str
    capacity_type: CapacityType
    arch: Arch
    vcpus: float
    memory_gib: float
    gpus: float
    gpu_model: str | None
    price_per_hour: float
    max_nodes: int | None  # None = unbounded (public on-demand/spot)
    price_source: str
    price_as_of: str  # ISO 8601

    def __reduce__(self) -> tuple[type[Pool], tuple[object, ...]]:
        # positional re-construction: ~5x faster to unpickle than the dataclass default,
        # which matters for the ~190k pools of a cached catalog
        return (
            Pool,
            (
                self.id,
                self.site,
                self.instance_type,
                self.capacity_type,
                self.arch,
                self.vcpus,
                self.memory_gib,
                self.gpus,
                self.gpu_model,
                self.price_per_hour,
                self.max_nodes,
                self.price_source,
                self.price_as_of,
            ),
        )

    @staticmethod
    def make_id(site: str, instance_type: str, capacity_type: CapacityType | str) -> str:
        return f"{site}/{instance_type}/{CapacityType(capacity_type).value}"


@dataclass(frozen=True, slots=True)
class ResidencyPolicy:
    """Where data may live. Empty allow-lists mean "no restriction of that kind"."""

    name: str
    allowed_countries: frozenset[str] = frozenset()
    denied_countries: frozenset[str] = frozenset()
    allowed_jurisdictions: frozenset[str] = frozenset()
    description: str = ""

    def allows(self, site: Site) -> bool:
        if site.country in self.denied_countries:
            return False
        if not self.allowed_countries and not self.allowed_jurisdictions:
            return True
        if site.country in self.allowed_countries:
            return True
        return bool(self.allowed_jurisdictions.intersection(site.jurisdictions))


@dataclass(frozen=True, slots=True)
class UserRegion:
    name: str
    lat: float | None = None
    lon: float | None = None
    site: str | None = None


@dataclass(frozen=True, slots=True)
class Dependency:
    workload: str
    gib_per_hour: float


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    replicas: int
    cpu: float
    memory_gib: float
    gpus: float = 0.0
    gpu_model: str | None = None
    arch: tuple[Arch, ...] = (Arch.AMD64,)
    storage_gib: float = 0.0
    storage_tier: StorageTier = StorageTier.SSD
    residency: ResidencyPolicy | None = None
    latency_slo_ms: Mapping[str, float] = field(default_factory=dict)
    min_sites: int = 1
    max_per_node: int | None = None  # at most this many replicas on one node (None: no limit)
    capacity_types: tuple[CapacityType, ...] = (CapacityType.ONDEMAND, CapacityType.RESERVED)
    providers: tuple[str, ...] | None = None
    depends_on: tuple[Dependency, ...] = ()
    max_spot_fraction: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()  # instance requirements, all must hold (docs/solver.md)
    burstable: BurstablePolicy = BurstablePolicy.BASELINE


@dataclass(frozen=True, slots=True)
class Objective:
    cost: float = 1.0
    latency: float = 0.0  # weight on replica-seconds of user RTT per hour (see docs/solver.md)
    carbon: float = 0.0  # weight on kg CO2e per hour


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    name: str
    workloads: tuple[Workload, ...]
    user_regions: tuple[UserRegion, ...] = ()
    horizon_hours: float = HOURS_PER_MONTH
    objective: Objective = Objective()
    dry_run: bool = False
    time_limit_s: float | None = None  # None: the service's default budget for the request's size
    reproducible: bool = False  # solved on work limits, not the clock (SolverOptions.work_limits)
    # stability: the running placement, what moving a replica off its pool costs, a cap on moves
    current: tuple[tuple[str, str, int], ...] = ()  # (workload, pool, replicas)
    migration_cost_per_replica: float = 0.0  # USD, one-off, amortised over horizon_hours
    max_moves: int | None = None
    latency_quantile: str = "p50"  # the RTT statistic SLOs are checked against: p50 typical, p95 conservative


@dataclass(frozen=True, slots=True)
class Explanation:
    cost_per_hour: float
    binding: tuple[str, ...]
    next_best: str | None
    next_best_extra_per_hour: float | None = None  # >= 0: the runner-up costs at least as much
    cost_breakdown: Mapping[str, float] = field(default_factory=dict)
    # a cheaper home (alone) the plan passed over: {"pool", "saving_per_hour", "because": [...]}
    preferred_over: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    workload: str
    pool: str
    site: str
    replicas: int
    latency_ms: Mapping[str, float]
    explanation: Explanation
    latency_slo_margin_ms: Mapping[str, float] = field(default_factory=dict)  # SLO - RTT per user region


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    pool: str
    count: int
    cost_per_hour: float


@dataclass(frozen=True, slots=True)
class NodeReplicas:
    """Replicas of one workload on one node, with what each requests."""

    workload: str
    replicas: int
    cpu: float
    memory_gib: float
    gpus: float = 0.0


@dataclass(frozen=True, slots=True)
class NodeAssignment:
    """One node of a pool (index 0 .. count - 1 of the pool's `NodeAllocation`) and what runs on it."""

    pool: str
    node: int
    replicas: tuple[NodeReplicas, ...]


@dataclass(frozen=True, slots=True)
class PackingReport:
    """What exact packing (every replica on a concrete node) changed in the aggregate answer."""

    aggregate_nodes: int  # nodes the aggregate capacity rule asked for
    nodes: int  # nodes the packing uses (the answer's)
    aggregate_cost_per_hour: float  # the answer's cost before packing
    aggregate_gap_pct: float
    moved_replicas: int  # moved off owned pools whose nodes could not hold them
    pools: int
    pools_proven: int  # pools where no packing uses fewer nodes
    pools_cp_sat: int  # pools CP-SAT ran on (first-fit decreasing not proven minimal)
    pools_cp_sat_better: int  # of those, where CP-SAT used fewer nodes than first-fit decreasing
    ffd_nodes: int  # nodes first-fit decreasing alone would have used
    packing_ms: int
    nodes_consolidated: int = 0  # nodes emptied: their replicas cost less elsewhere at the site


@dataclass(frozen=True, slots=True)
class Baseline:
    """What a placement is compared with: a named policy and what it would cost (None: it could
    not place the request, or was not computed)."""

    policy: str
    cost_per_hour: float | None
    description: str = ""

    def savings_pct(self, cost_per_hour: float) -> float | None:
        """1 - cost / baseline, in percent (None without a positive baseline cost)."""
        if not self.cost_per_hour or self.cost_per_hour <= 0:
            return None
        return round((self.cost_per_hour - cost_per_hour) / self.cost_per_hour * 100.0, 2)


class StopReason(StrEnum):
    """Why the solver stopped searching (docs/solver.md, "Why the search stopped")."""

    OPTIMAL = "optimal"  # proven optimal: the gap is at most 0.01 %
    GAP_TARGET = "gap_target"  # the gap target (SolverOptions.rel_gap) is proven
    TIME_LIMIT = "time_limit"  # the time ran out with the gap target not proven
    STALL = "stall"  # the search had nothing left to try well before its time ran out
    INFEASIBLE = "infeasible"  # no placement keeps every hard rule


class BoundKind(StrEnum):
    """What proves an answer's lower bound (docs/solver.md, "What the gap is made of")."""

    LP = "lp"  # the LP over the whole catalog, converged (with the pattern cuts it holds)
    MIP = "mip"  # the final MIP's dual bound, with reduced-cost inclusion for the rest of the catalog
    LAGRANGIAN = "lagrangian"  # the Lagrangian bound at the last duals of an unfinished LP
    NODE_SHARE = "node_share"  # each replica's cheapest share of a node's cost (bounds/node_share.py)
    LOOSE_LP = "loose_lp"  # the converged LP with fit rows not capped at a class's replicas


@dataclass(frozen=True, slots=True)
class PlacementResult:
    status: str  # optimal | feasible | infeasible
    objective_value: float
    cost_per_hour: float
    lower_bound_per_hour: float
    gap_pct: float
    baseline: Baseline
    savings_pct: float | None
    solve_ms: int
    nodes: tuple[NodeAllocation, ...]
    assignments: tuple[Assignment, ...]
    egress_cost_per_hour: float = 0.0
    storage_cost_per_hour: float = 0.0
    rejected: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # workload -> reason -> pools
    warnings: tuple[str, ...] = ()
    # every replica on a concrete node of its pool (empty for placements stored before packing)
    node_assignments: tuple[NodeAssignment, ...] = ()
    packing: PackingReport | None = None
    # why the solver stopped (StopReason's values) and the time limit it was given; None on
    # placements stored before they were recorded
    stop_reason: str | None = None
    time_limit_s: float | None = None
    # what proves lower_bound_per_hour (BoundKind's values); None on placements stored before it
    bound_kind: str | None = None
    # every baseline priced, `baseline` (the headline, which savings_pct compares with) first;
    # empty for placements stored before there was more than one
    baselines: tuple[Baseline, ...] = ()
