"""Fleet simulations (`POST /v1/simulations`): the request, progress, and the results once done.

Results (`summary`, `series`, `events`, `warnings`) are written in the one transaction that marks the run
succeeded; a failed or cancelled run keeps none, so nothing half-stored is ever read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from broker.db.models import Base, UtcDateTime, utcnow


class SimulationRow(Base):
    __tablename__ = "simulations"
    __table_args__ = (Index("ix_simulations_tenant_created", "tenant", "created_at"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), index=True)  # queued|running|succeeded|failed|cancelled
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    progress: Mapped[float] = mapped_column(Float, default=0.0)  # 0..1 over every policy's steps
    progress_detail: Mapped[str] = mapped_column(String(200), default="")
    summary: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    series: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    events: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # what makes a succeeded run's figures doubtful (migration 0023; None: stored before it)
    warnings: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
