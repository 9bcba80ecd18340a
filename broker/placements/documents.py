"""The placement response document (JSON over REST, JSON/YAML in the CLI), built from a stored
or fresh placement record. The request is broker/placements/request_documents.py.

One definition serves the API (OpenAPI schema) and the embedded CLI, so both print exactly
the same documents.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from broker.core.domain import (
    Assignment,
    Baseline,
    Explanation,
    NodeAllocation,
    NodeAssignment,
    NodeReplicas,
    PackingReport,
)
from broker.core.placement import BudgetFigure, Placement, PriceSnapshot
from broker.forecast.demand import RightsizingOut

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
    nodes_consolidated: int = Field(
        0,
        description="nodes packing opened that were emptied again: their replicas cost less on room left on other "
        "nodes or on smaller nodes at the same site",
    )

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
            nodes_consolidated=p.nodes_consolidated,
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

    bound_kind: Literal["lp", "mip", "lagrangian", "node_share", "loose_lp"] | None = Field(
        None,
        description="extension: what proves lower_bound_per_hour: lp (the LP over the whole catalog, converged, "
        "with its pattern cuts: every node's replicas as a real node holds them), mip (the final MIP's dual bound, "
        "the rest of the catalog by reduced costs), lagrangian or loose_lp (the LP did not converge in time), "
        "node_share (each replica's cheapest share of a node: enterprise-sized requests); left out for "
        "placements stored before it",
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
            bound_kind=r.bound_kind,
        )


def placement_document(p: Placement) -> dict[str, Any]:
    """The response document as JSON data, for the CLI and job results (the API serialises PlacementOut)."""
    return PlacementOut.from_domain(p).model_dump(mode="json")
