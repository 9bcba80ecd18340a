"""Rows of the production service: API keys, budgets and their ledger, jobs, idempotency records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Index, Integer, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broker.db.models import Base, UtcDateTime, utcnow


class ApiKeyRow(Base):
    """An API key. Only a SHA-256 of its secret is stored; the key itself is shown once."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100), index=True)
    role: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(200), default="")
    secret_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class BudgetRow(Base):
    """A monthly budget of a tenant ("" team = the whole tenant) or of one team label in it."""

    __tablename__ = "budgets"
    __table_args__ = (UniqueConstraint("tenant", "team", name="uq_budgets_tenant_team"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(100), index=True)
    team: Mapped[str] = mapped_column(String(200), default="")
    monthly_usd: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class FamilyQuotaRow(Base):
    """A tenant's vCPU quota in one provider quota group ("aws:Inf", "azure:ndasrv4"), set by the
    operator: what the tenant's accounts can launch there (docs/solver.md, "Node classes")."""

    __tablename__ = "family_quotas"
    __table_args__ = (UniqueConstraint("tenant", "quota_group", name="uq_family_quotas_tenant_group"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(100), index=True)
    quota_group: Mapped[str] = mapped_column(String(120))
    vcpus: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class CommitmentRow(Base):
    """The run rate a tenant has committed under one placement name (the latest placement wins).

    Budgets sum cost_per_month over these rows; fair share sums scarce_nodes of other tenants.
    """

    __tablename__ = "budget_commitments"
    tenant: Mapped[str] = mapped_column(String(100), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    team: Mapped[str] = mapped_column(String(200), default="", index=True)
    placement_id: Mapped[str] = mapped_column(String(40))
    cost_per_month: Mapped[float] = mapped_column(Float)
    # team -> the part of cost_per_month its workloads cost (a workload's labels.team, else the
    # request's team: broker.finops.ledger.workload_teams); a team's budget sums these
    team_costs: Mapped[dict[str, float]] = mapped_column(JSON, default=dict)
    # private/edge pool id -> nodes this placement uses there
    scarce_nodes: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_tenant_created", "tenant", "created_at"),
        Index("ix_jobs_status_kind", "status", "kind"),  # /metrics counts jobs by these at every scrape
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20), index=True)  # queued|running|succeeded|failed
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    placement_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    # written by the runner while the job runs (broker/jobs/store.py): a running job whose
    # heartbeat stopped lost its runner (killed, crashed) and is failed
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class IdempotencyRow(Base):
    """The first answer to a POST carrying an Idempotency-Key, replayed to its retries."""

    __tablename__ = "idempotency_keys"
    scope: Mapped[str] = mapped_column(String(100), primary_key=True)  # API key id or "local"
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_sha256: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(10))  # pending|done
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    headers: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    body: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, index=True)
