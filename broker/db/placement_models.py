"""Stored placements: a header row and one row per provisioned pool, assignment, budget and sizing.

Each row class maps one domain entity of broker.core.placement both ways
(`from_domain`, `to_domain`); nothing here knows the response documents. Small
value collections of an entity (an assignment's latencies, binding constraints,
cost breakdown; the header's warnings and rejection counts) are JSON columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    ColumnElement,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    false,
    select,
)
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship

from broker.core.domain import (
    Assignment,
    Baseline,
    Explanation,
    NodeAllocation,
    NodeAssignment,
    NodeReplicas,
    PackingReport,
    PlacementResult,
)
from broker.core.placement import (
    BudgetFigure,
    Placement,
    PlacementSummary,
    PoolPrice,
    PriceSnapshot,
    ResourceSizing,
    SizingReport,
    WorkloadSizing,
)
from broker.db.mapping import from_columns, to_columns
from broker.db.models import Base, UtcDateTime, utcnow


def _parent() -> ForeignKey:
    return ForeignKey("placements.id", ondelete="CASCADE")


_CHUNK = 500

# columns named apart from the rest of their record's prefix
_OWN_NAME = {"price_per_hour": "price_per_hour"}  # PoolPrice, prefix price_
_SNAPSHOT_COLUMNS = {"catalog_version": "catalog_version", "stale_after_days": "price_stale_after_days"}


class PlacementPoolRow(Base):
    """A provisioned pool: how many nodes, what they cost, the catalog price they were planned at."""

    __tablename__ = "placement_pools"
    placement_id: Mapped[str] = mapped_column(String(40), _parent(), primary_key=True)
    line: Mapped[int] = mapped_column(Integer, primary_key=True)
    pool: Mapped[str] = mapped_column(String(300))
    count: Mapped[int] = mapped_column(Integer)
    cost_per_hour: Mapped[float] = mapped_column(Float)
    # the price snapshot's entry for this pool (all NULL when the catalog did not price it)
    price_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    price_source: Mapped[str | None] = mapped_column(String(40), nullable=True)
    price_as_of: Mapped[str | None] = mapped_column(String(40), nullable=True)
    price_stale: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # exact packing: per node of the pool, the replicas it runs ([{workload, replicas, cpu,
    # memory_gib, gpus}, ...] per node); NULL for placements stored before packing
    node_replicas: Mapped[list[list[dict[str, Any]]] | None] = mapped_column(JSON, nullable=True)

    @classmethod
    def from_domain(
        cls, line: int, node: NodeAllocation, price: PoolPrice | None, packed: Sequence[NodeAssignment] = ()
    ) -> PlacementPoolRow:
        return cls(
            line=line,
            node_replicas=[[dataclasses.asdict(r) for r in n.replicas] for n in packed] if packed else None,
            **to_columns(cls, node),
            **to_columns(cls, price, prefix="price_", rename=_OWN_NAME),
        )

    @staticmethod
    def to_domain(r: Any) -> NodeAllocation:
        return from_columns(NodeAllocation, r)

    @staticmethod
    def node_assignments(r: Any) -> list[NodeAssignment]:
        return [
            NodeAssignment(pool=r.pool, node=i, replicas=tuple(NodeReplicas(**x) for x in reps))
            for i, reps in enumerate(r.node_replicas or [])
        ]

    @staticmethod
    def price(r: Any) -> PoolPrice | None:
        if r.price_per_hour is None:
            return None
        return from_columns(PoolPrice, r, prefix="price_", rename=_OWN_NAME)


class PlacementAssignmentRow(Base):
    """Replicas of one workload on one pool, with why they went there."""

    __tablename__ = "placement_assignments"
    placement_id: Mapped[str] = mapped_column(String(40), _parent(), primary_key=True)
    line: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload: Mapped[str] = mapped_column(String(200))
    pool: Mapped[str] = mapped_column(String(300))
    site: Mapped[str] = mapped_column(String(200), index=True)
    replicas: Mapped[int] = mapped_column(Integer)
    latency_ms: Mapped[dict[str, float]] = mapped_column(JSON)  # user region -> RTT
    latency_slo_margin_ms: Mapped[dict[str, float]] = mapped_column(JSON)  # user region -> SLO minus RTT
    cost_per_hour: Mapped[float] = mapped_column(Float)
    binding: Mapped[list[str]] = mapped_column(JSON)
    next_best: Mapped[str | None] = mapped_column(Text, nullable=True)
    next_best_extra_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    cost_breakdown: Mapped[dict[str, float]] = mapped_column(JSON)  # compute, storage, ...
    # a cheaper home passed over: {"pool", "saving_per_hour", "because"} (solver/answer/explain.py)
    preferred_over: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)

    @classmethod
    def from_domain(cls, line: int, a: Assignment) -> PlacementAssignmentRow:
        return cls(line=line, **to_columns(cls, a), **to_columns(cls, a.explanation))

    @staticmethod
    def to_domain(r: Any) -> Assignment:
        return from_columns(Assignment, r, explanation=from_columns(Explanation, r))


class PlacementBudgetRow(Base):
    __tablename__ = "placement_budgets"
    placement_id: Mapped[str] = mapped_column(String(40), _parent(), primary_key=True)
    line: Mapped[int] = mapped_column(Integer, primary_key=True)
    team: Mapped[str | None] = mapped_column(String(200), nullable=True)
    monthly_usd: Mapped[float] = mapped_column(Float)
    used: Mapped[float] = mapped_column(Float)
    this_placement: Mapped[float] = mapped_column(Float)
    projected: Mapped[float] = mapped_column(Float)
    remaining: Mapped[float] = mapped_column(Float)
    over: Mapped[bool] = mapped_column(Boolean)

    @classmethod
    def from_domain(cls, line: int, b: BudgetFigure) -> PlacementBudgetRow:
        return cls(line=line, **to_columns(cls, b))

    @staticmethod
    def to_domain(r: Any) -> BudgetFigure:
        return from_columns(BudgetFigure, r)


class PlacementSizingResourceRow(Base):
    __tablename__ = "placement_sizing_resources"
    __table_args__ = (
        ForeignKeyConstraint(
            ["placement_id", "line"],
            ["placement_sizing.placement_id", "placement_sizing.line"],
            ondelete="CASCADE",
        ),
    )
    placement_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    line: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(String(20), primary_key=True)  # cpu | memory_gib
    declared: Mapped[float] = mapped_column(Float)
    forecast: Mapped[float] = mapped_column(Float)
    p50_peak: Mapped[float] = mapped_column(Float)
    p95_peak: Mapped[float] = mapped_column(Float)
    change_pct: Mapped[float] = mapped_column(Float)
    method: Mapped[str] = mapped_column(String(80))
    forecaster: Mapped[str | None] = mapped_column(String(80), nullable=True)
    backtest_mae: Mapped[float | None] = mapped_column(Float, nullable=True)
    regime_shift: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    @classmethod
    def from_domain(cls, metric: str, r: ResourceSizing) -> PlacementSizingResourceRow:
        return cls(metric=metric, **to_columns(cls, r))

    @staticmethod
    def to_domain(r: Any) -> ResourceSizing:
        return from_columns(ResourceSizing, r)


class PlacementSizingRow(Base):
    """One workload of a placement's right-sizing report."""

    __tablename__ = "placement_sizing"
    placement_id: Mapped[str] = mapped_column(String(40), _parent(), primary_key=True)
    line: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(300))
    model_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    horizon_hours: Mapped[float] = mapped_column(Float)
    headroom_pct: Mapped[float] = mapped_column(Float)
    warnings: Mapped[list[str]] = mapped_column(JSON)
    resources: Mapped[list[PlacementSizingResourceRow]] = relationship(
        cascade="all, delete-orphan", order_by=PlacementSizingResourceRow.metric, lazy="raise"
    )

    @classmethod
    def from_domain(cls, line: int, w: WorkloadSizing) -> PlacementSizingRow:
        resources = [PlacementSizingResourceRow.from_domain(m, r) for m, r in w.resources().items()]
        return cls(line=line, **to_columns(cls, w), resources=resources)

    @staticmethod
    def to_domain(w: Any, resources: Sequence[Any]) -> WorkloadSizing:
        by_metric = {r.metric: PlacementSizingResourceRow.to_domain(r) for r in resources}
        return from_columns(WorkloadSizing, w, cpu=by_metric.get("cpu"), memory_gib=by_metric.get("memory_gib"))


class PlacementRow(Base):
    """The header of a stored placement: its figures, and what it was asked."""

    __tablename__ = "placements"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    tenant: Mapped[str] = mapped_column(String(80), default="default", index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, index=True)
    status: Mapped[str] = mapped_column(String(20))
    objective_value: Mapped[float] = mapped_column(Float)
    cost_per_hour: Mapped[float] = mapped_column(Float)
    lower_bound_per_hour: Mapped[float] = mapped_column(Float)
    gap_pct: Mapped[float] = mapped_column(Float)
    baseline_policy: Mapped[str] = mapped_column(String(80))
    baseline_cost_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    savings_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    # every baseline priced, the headline first: [{policy, cost_per_hour, description}];
    # NULL for placements stored before 0018 (their one baseline is the header's)
    baselines: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    solve_ms: Mapped[int] = mapped_column(Integer)
    # the solver's time limit and why it stopped; NULL on placements stored before revision 0020
    time_limit_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    stop_reason: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # what proves the lower bound (BoundKind); NULL on placements stored before revision 0028
    bound_kind: Mapped[str | None] = mapped_column(String(20), nullable=True)
    egress_cost_per_hour: Mapped[float] = mapped_column(Float)
    storage_cost_per_hour: Mapped[float] = mapped_column(Float)
    latency_quantile: Mapped[str] = mapped_column(String(8))  # p50 | p95: the statistic of the latencies
    rejected: Mapped[dict[str, dict[str, int]]] = mapped_column(JSON)  # workload -> reason -> pools
    warnings: Mapped[list[str]] = mapped_column(JSON)
    price_as_of: Mapped[dict[str, str]] = mapped_column(JSON)  # provider -> newest price date used
    # the price snapshot's header; NULL: the placement has no snapshot
    catalog_version: Mapped[str | None] = mapped_column(String(64), nullable=True)
    price_stale_after_days: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the right-sizing report's figures; sizing_cost_per_hour NULL: no report
    sizing_declared_cost_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    sizing_cost_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    sizing_savings_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    sizing_savings_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the request document as the client sent it (validated): a replan solves it again
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    # what exact packing changed against the aggregate rule (PackingReport's fields); NULL: stored before it
    packing: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)

    pools: Mapped[list[PlacementPoolRow]] = relationship(
        cascade="all, delete-orphan", order_by=PlacementPoolRow.line, lazy="raise"
    )
    assignments: Mapped[list[PlacementAssignmentRow]] = relationship(
        cascade="all, delete-orphan", order_by=PlacementAssignmentRow.line, lazy="raise"
    )
    budgets: Mapped[list[PlacementBudgetRow]] = relationship(
        cascade="all, delete-orphan", order_by=PlacementBudgetRow.line, lazy="raise"
    )
    sizing: Mapped[list[PlacementSizingRow]] = relationship(
        cascade="all, delete-orphan", order_by=PlacementSizingRow.line, lazy="raise"
    )

    @classmethod
    def from_domain(cls, p: Placement) -> PlacementRow:
        if p.id is None or p.created_at is None:
            raise ValueError("only a stored placement (with id and created_at) has rows")
        r, prices, sizing = p.result, p.prices, p.rightsizing
        packed: dict[str, list[NodeAssignment]] = {}
        for node in r.node_assignments:
            packed.setdefault(node.pool, []).append(node)
        return cls(
            **to_columns(cls, p),
            **{
                **to_columns(cls, r),
                "packing": dataclasses.asdict(r.packing) if r.packing else None,
                # every baseline priced, the headline first; NULL for placements stored before 0018
                "baselines": [
                    {"policy": b.policy, "cost_per_hour": b.cost_per_hour, "description": b.description}
                    for b in r.baselines
                ]
                or None,
            },
            **to_columns(cls, r.baseline, prefix="baseline_"),
            **to_columns(cls, prices, rename=_SNAPSHOT_COLUMNS),
            **to_columns(cls, sizing, prefix="sizing_"),
            pools=[
                PlacementPoolRow.from_domain(i, n, prices.pools.get(n.pool) if prices else None, packed.get(n.pool, ()))
                for i, n in enumerate(r.nodes)
            ],
            assignments=[PlacementAssignmentRow.from_domain(i, a) for i, a in enumerate(r.assignments)],
            budgets=[PlacementBudgetRow.from_domain(i, b) for i, b in enumerate(p.budget or ())],
            sizing=[PlacementSizingRow.from_domain(i, w) for i, w in enumerate(sizing.workloads if sizing else ())],
        )

    @staticmethod
    def to_domain(h: Any, children: Children) -> Placement:
        """The placement of a header row and its child rows (ORM rows or plain result rows)."""
        pools = children.pools
        result = from_columns(
            PlacementResult,
            h,
            baseline=from_columns(
                Baseline,
                h,
                prefix="baseline_",
                description=str(h.baselines[0]["description"]) if h.baselines else "",
            ),
            baselines=tuple(Baseline(**b) for b in h.baselines or ()),
            nodes=tuple(PlacementPoolRow.to_domain(n) for n in pools),
            assignments=tuple(PlacementAssignmentRow.to_domain(a) for a in children.assignments),
            node_assignments=tuple(a for n in pools for a in PlacementPoolRow.node_assignments(n)),
            packing=PackingReport(**h.packing) if h.packing else None,
        )
        prices = None
        if h.catalog_version is not None:
            priced = {n.pool: PlacementPoolRow.price(n) for n in pools}
            prices = from_columns(
                PriceSnapshot,
                h,
                rename=_SNAPSHOT_COLUMNS,
                stale_after_days=float(h.price_stale_after_days or 0.0),  # NULL in rows migrated from old results
                pools={pool: price for pool, price in priced.items() if price is not None},
            )
        sizing = None
        if h.sizing_cost_per_hour is not None:
            workloads = tuple(PlacementSizingRow.to_domain(w, res) for w, res in children.sizing)
            sizing = from_columns(SizingReport, h, prefix="sizing_", workloads=workloads)
        return from_columns(
            Placement,
            h,
            result=result,
            created_at=h.created_at,
            prices=prices,
            rightsizing=sizing,
            budget=tuple(PlacementBudgetRow.to_domain(b) for b in children.budgets) or None,
        )

    def children(self) -> Children:
        """This ORM row's children as to_domain takes them (the relationships must be loaded)."""
        return Children(
            list(self.pools), list(self.assignments), list(self.budgets), [(w, list(w.resources)) for w in self.sizing]
        )

    @staticmethod
    def summary(h: Any) -> PlacementSummary:
        return from_columns(PlacementSummary, h, created_at=h.created_at)


Index("ix_placements_tenant_created", PlacementRow.tenant, PlacementRow.created_at)


@dataclass
class Children:
    """A placement's child rows, each list in line order (sizing: each workload with its resources)."""

    pools: list[Any] = field(default_factory=list)
    assignments: list[Any] = field(default_factory=list)
    budgets: list[Any] = field(default_factory=list)
    sizing: list[tuple[Any, list[Any]]] = field(default_factory=list)


def _child_rows(session: Session, table: Any, ids: list[str], *order: str) -> Sequence[Any]:
    t = table.__table__
    q = select(t).where(t.c.placement_id.in_(ids)).order_by(t.c.placement_id, *(t.c[o] for o in order))
    return session.execute(q).all()


def load_placements(session: Session, *where: ColumnElement[bool]) -> list[Placement]:
    """The placements whose header matches `where`, in header-id order.

    Read as plain rows, not ORM objects: the ledger's first sync reads thousands of
    placements, and building ORM instances of their pools and assignments was most of it.
    """
    header = PlacementRow.__table__
    heads = session.execute(select(header).where(*where).order_by(header.c.id)).all()
    out: list[Placement] = []
    for i in range(0, len(heads), _CHUNK):
        chunk = heads[i : i + _CHUNK]
        ids = [h.id for h in chunk]
        kids = {pid: Children() for pid in ids}
        for r in _child_rows(session, PlacementPoolRow, ids, "line"):
            kids[r.placement_id].pools.append(r)
        for r in _child_rows(session, PlacementAssignmentRow, ids, "line"):
            kids[r.placement_id].assignments.append(r)
        for r in _child_rows(session, PlacementBudgetRow, ids, "line"):
            kids[r.placement_id].budgets.append(r)
        resources: dict[tuple[str, int], list[Any]] = {}
        for r in _child_rows(session, PlacementSizingResourceRow, ids, "line", "metric"):
            resources.setdefault((r.placement_id, r.line), []).append(r)
        for r in _child_rows(session, PlacementSizingRow, ids, "line"):
            kids[r.placement_id].sizing.append((r, resources.get((r.placement_id, r.line), [])))
        out += [PlacementRow.to_domain(h, kids[h.id]) for h in chunk]
    return out
