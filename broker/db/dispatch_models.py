"""Rows of the dispatch area: target clusters, dispatches with their outbox, replans."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from broker.db.models import Base, UtcDateTime, utcnow


class ClusterRow(Base):
    __tablename__ = "dispatch_clusters"
    tenant: Mapped[str] = mapped_column(String(80), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    site: Mapped[str] = mapped_column(String(200), index=True)
    kind: Mapped[str] = mapped_column(String(20))  # kubernetes | gitops
    namespace: Mapped[str] = mapped_column(String(63))
    kubeconfig: Mapped[str | None] = mapped_column(Text, nullable=True)  # operator's path on the server
    context: Mapped[str | None] = mapped_column(String(200), nullable=True)
    gitops_dir: Mapped[str | None] = mapped_column(Text, nullable=True)  # operator's path on the server
    # a tenant's kubeconfig, Fernet-encrypted with BROKER_SECRET_KEY (broker/access/secretbox.py)
    kubeconfig_sealed: Mapped[str | None] = mapped_column(Text, nullable=True)
    gitops_repo: Mapped[str | None] = mapped_column(Text, nullable=True)  # URL without credentials
    gitops_repo_sealed: Mapped[str | None] = mapped_column(Text, nullable=True)  # the URL with them, encrypted
    gitops_branch: Mapped[str | None] = mapped_column(String(200), nullable=True)
    gitops_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class DispatchRow(Base):
    """One dispatch of one placement; (placement, fingerprint) is the idempotency key."""

    __tablename__ = "dispatches"
    __table_args__ = (UniqueConstraint("placement_id", "fingerprint", name="uq_dispatch_placement_fp"),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(80), index=True)
    placement_id: Mapped[str] = mapped_column(ForeignKey("placements.id", ondelete="CASCADE"), index=True)
    app: Mapped[str] = mapped_column(String(63), index=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(20))  # pending | applying | applied | failed
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, index=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class OutboxRow(Base):
    """One cluster's share of a dispatch: the exact manifests to apply, applied at least once."""

    __tablename__ = "dispatch_outbox"
    # one row per cluster and migration wave (a cluster may change in several waves)
    __table_args__ = (UniqueConstraint("dispatch_id", "seq", name="uq_outbox_dispatch_seq"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dispatch_id: Mapped[str] = mapped_column(ForeignKey("dispatches.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    cluster: Mapped[str] = mapped_column(String(63))
    state: Mapped[str] = mapped_column(String(20))  # pending | applying | done | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class ReplanRow(Base):
    __tablename__ = "replans"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(80), index=True)
    from_placement: Mapped[str] = mapped_column(ForeignKey("placements.id", ondelete="CASCADE"), index=True)
    to_placement: Mapped[str | None] = mapped_column(String(40), nullable=True)
    reason: Mapped[str] = mapped_column(String(40))
    decision: Mapped[str] = mapped_column(String(20))  # migrate | keep
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, index=True)
