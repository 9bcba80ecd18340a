"""Rows of the pricing area: price history, list prices, discount rules, refresh jobs,
imported site definitions and per-site storage prices (migration 0002); instance-type facts (0016)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from broker.db.models import Base, UtcDateTime, utcnow


class PriceHistoryRow(Base):
    """One price of one pool as a feed (or the TCO model) stated it, with when it took effect."""

    __tablename__ = "price_history"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    pool_id: Mapped[str] = mapped_column(String(300))
    price_per_hour: Mapped[float] = mapped_column(Float)  # effective, after discounts
    list_price_per_hour: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(40))
    effective_at: Mapped[str] = mapped_column(String(40))  # ISO 8601 as the source gives it
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    refresh_id: Mapped[str | None] = mapped_column(String(40), nullable=True)


Index("ix_price_history_pool_recorded", PriceHistoryRow.pool_id, PriceHistoryRow.recorded_at)


class ListPriceRow(Base):
    """The undiscounted price behind a pool's effective price, so discount rules can be re-applied."""

    __tablename__ = "list_prices"
    pool_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    price_per_hour: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(40))
    as_of: Mapped[str] = mapped_column(String(40))


class DiscountRuleRow(Base):
    __tablename__ = "discount_rules"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(40))
    family: Mapped[str] = mapped_column(String(80), default="*")  # glob on the instance type
    region: Mapped[str] = mapped_column(String(120), default="*")  # glob on the region
    capacity_types: Mapped[list[str]] = mapped_column(JSON, default=list)  # empty = all
    discount_pct: Mapped[float] = mapped_column(Float)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class SiteDefinitionRow(Base):
    """The document a private or edge site was imported from (TCO inputs kept for audit)."""

    __tablename__ = "site_definitions"
    site_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    imported_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class SiteStoragePriceRow(Base):
    """Block-storage price at one site and tier from a live feed; overrides the per-provider price."""

    __tablename__ = "site_storage_prices"
    site: Mapped[str] = mapped_column(String(200), primary_key=True)
    tier: Mapped[str] = mapped_column(String(20), primary_key=True)
    usd_per_gb_month: Mapped[float] = mapped_column(Float)
    product: Mapped[str] = mapped_column(String(80), default="")
    source: Mapped[str] = mapped_column(String(40), default="")
    as_of: Mapped[str] = mapped_column(String(40), default="")


class InstanceTypeFactRow(Base):
    """What a live feed stated about an instance type beyond its size (migration 0016): the
    instance-requirement attributes a name does not tell. Wins over the bundled catalog's facts."""

    __tablename__ = "instance_type_facts"
    provider: Mapped[str] = mapped_column(String(20), primary_key=True)
    instance_type: Mapped[str] = mapped_column(String(120), primary_key=True)
    processor: Mapped[str | None] = mapped_column(String(200), nullable=True)
    gpu_memory_gib: Mapped[float | None] = mapped_column(Float, nullable=True)  # per GPU
    bare_metal: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    as_of: Mapped[str] = mapped_column(String(40), default="")
