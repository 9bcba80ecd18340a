"""A tenant's own round-trip measurements (migration 0009); the catalog's are in `latency`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, String
from sqlalchemy.orm import Mapped, mapped_column

from broker.db.models import Base, UtcDateTime, utcnow


class LatencyMeasurementRow(Base):
    """One measured path of one tenant in one statistic; a re-import of the same path,
    statistic and source replaces its value."""

    __tablename__ = "latency_measurements"
    tenant: Mapped[str] = mapped_column(String(80), primary_key=True)
    src: Mapped[str] = mapped_column(String(200), primary_key=True)  # site id
    dst: Mapped[str] = mapped_column(String(200), primary_key=True)  # site id, geo:lat,lon or user region name
    statistic: Mapped[str] = mapped_column(String(8), primary_key=True)  # p50 | p95
    source: Mapped[str] = mapped_column(String(200), primary_key=True)
    rtt_ms: Mapped[float] = mapped_column(Float)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
