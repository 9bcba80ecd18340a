"""Rows of the forecasting area: usage samples and versioned trained models (migration 0003)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, Index, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from broker.db.models import Base, UtcDateTime, utcnow


class UsageSampleRow(Base):
    """One observed usage value of one series (a workload's total across replicas)."""

    __tablename__ = "usage_samples"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(80), default="default")
    series: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(40), default="cpu")
    ts: Mapped[int] = mapped_column(BigInteger)  # Unix seconds
    value: Mapped[float] = mapped_column(Float)


Index(
    "ix_usage_samples_series_ts",
    UsageSampleRow.tenant,
    UsageSampleRow.series,
    UsageSampleRow.metric,
    UsageSampleRow.ts,
)


class ForecastModelRow(Base):
    """A trained global forecaster: the XGBoost booster as bytes plus how it scored on hold-out."""

    __tablename__ = "forecast_models"
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # whose usage it learned from: it forecasts for that tenant only (migration 0021)
    tenant: Mapped[str] = mapped_column(String(80), default="default", server_default="default", index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    metric: Mapped[str] = mapped_column(String(40))
    horizon: Mapped[int] = mapped_column(Integer)
    step_s: Mapped[int] = mapped_column(Integer)
    n_series: Mapped[int] = mapped_column(Integer)
    train_rows: Mapped[int] = mapped_column(Integer)
    description: Mapped[dict[str, Any]] = mapped_column(JSON)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    booster: Mapped[bytes] = mapped_column(LargeBinary)
