"""Savings ledger rows: one per stored placement, and its cost split into items.

The ledger is derived from the stored placements (see broker.finops.store) so
aggregations over thousands of placements run as narrow-row scans instead of
loading every placement with its pools and assignments.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from broker.db.models import Base, UtcDateTime


class LedgerEntryRow(Base):
    __tablename__ = "finops_ledger"
    placement_id: Mapped[str] = mapped_column(ForeignKey("placements.id", ondelete="CASCADE"), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(80))
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # when a newer placement of the same tenant and name replaced this one (None: still current)
    superseded_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    cost_per_hour: Mapped[float] = mapped_column(Float)
    # the headline baseline (what the user would otherwise run); equals cost_per_hour when unknown
    baseline_cost_per_hour: Mapped[float] = mapped_column(Float)
    has_baseline: Mapped[bool] = mapped_column(Boolean)
    # kubernetes-packer | placement-in-force; NULL: not computed (placements stored before 0018)
    baseline_policy: Mapped[str | None] = mapped_column(String(80), nullable=True)
    greedy_cost_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)  # NULL: greedy found none
    savings_per_hour: Mapped[float] = mapped_column(Float)
    savings_per_month: Mapped[float] = mapped_column(Float)


class LedgerItemRow(Base):
    __tablename__ = "finops_ledger_items"
    placement_id: Mapped[str] = mapped_column(
        ForeignKey("finops_ledger.placement_id", ondelete="CASCADE"), primary_key=True
    )
    line: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))  # compute | storage | egress
    workload: Mapped[str] = mapped_column(String(200))
    team: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(40))
    site: Mapped[str | None] = mapped_column(String(200), nullable=True)
    pool: Mapped[str | None] = mapped_column(String(300), nullable=True)
    quantity: Mapped[float] = mapped_column(Float, default=0.0)  # nodes, or GiB of storage
    unit_price_per_hour: Mapped[float] = mapped_column(Float, default=0.0)
    list_unit_price_per_hour: Mapped[float] = mapped_column(Float, default=0.0)
    cost_per_hour: Mapped[float] = mapped_column(Float)
    baseline_cost_per_hour: Mapped[float] = mapped_column(Float)
    greedy_cost_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)  # NULL read as cost
    # the node on demand at the negotiated price (FOCUS ContractedUnitPrice of committed rows)
    contracted_unit_price_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)


Index(
    "ix_finops_ledger_tenant_created",
    LedgerEntryRow.tenant,
    LedgerEntryRow.created_at,
)
Index("ix_finops_ledger_tenant_name", LedgerEntryRow.tenant, LedgerEntryRow.name)
