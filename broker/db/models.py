"""Database rows. Repositories turn them into domain objects; routes never see them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Dialect, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware column that reads back aware on every backend. SQLite keeps no offset,
    so it stores UTC and hands back naive values, which answers then showed without an offset
    ("created_at" of one job with and without "+00:00")."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.astimezone(UTC) if value is not None and value.tzinfo is not None else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    pass


class SiteRow(Base):
    __tablename__ = "sites"
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    provider: Mapped[str] = mapped_column(String(40), index=True)
    kind: Mapped[str] = mapped_column(String(20))
    region: Mapped[str] = mapped_column(String(120))
    name: Mapped[str] = mapped_column(String(200), default="")
    country: Mapped[str] = mapped_column(String(2))
    jurisdictions: Mapped[list[str]] = mapped_column(JSON, default=list)
    lat: Mapped[float | None] = mapped_column(Float, nullable=True)
    lon: Mapped[float | None] = mapped_column(Float, nullable=True)
    carbon_g_per_kwh: Mapped[float | None] = mapped_column(Float, nullable=True)
    carbon_source: Mapped[str | None] = mapped_column(String(200), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

    def to_domain(self) -> Site:
        return Site(
            id=self.id,
            provider=self.provider,
            kind=SiteKind(self.kind),
            region=self.region,
            country=self.country,
            jurisdictions=tuple(self.jurisdictions or ()),
            lat=self.lat,
            lon=self.lon,
            carbon_g_per_kwh=self.carbon_g_per_kwh,
            name=self.name,
        )


class PoolRow(Base):
    __tablename__ = "pools"
    id: Mapped[str] = mapped_column(String(300), primary_key=True)
    site: Mapped[str] = mapped_column(ForeignKey("sites.id", ondelete="CASCADE"), index=True)
    instance_type: Mapped[str] = mapped_column(String(120))
    capacity_type: Mapped[str] = mapped_column(String(20))
    arch: Mapped[str] = mapped_column(String(10))
    vcpus: Mapped[float] = mapped_column(Float)
    memory_gib: Mapped[float] = mapped_column(Float)
    gpus: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_model: Mapped[str | None] = mapped_column(String(80), nullable=True)
    price_per_hour: Mapped[float] = mapped_column(Float)
    max_nodes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    price_source: Mapped[str] = mapped_column(String(40))
    price_as_of: Mapped[str] = mapped_column(String(40))
    reserved_3yr_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)

    @staticmethod
    def values(p: Pool, *, reserved_3yr_per_hour: float | None = None) -> dict[str, Any]:
        """The one mapping of a domain pool onto this table's columns, for ORM rows, bulk INSERTs and COPY."""
        return {
            "id": p.id,
            "site": p.site,
            "instance_type": p.instance_type,
            "capacity_type": p.capacity_type.value,
            "arch": p.arch.value,
            "vcpus": p.vcpus,
            "memory_gib": p.memory_gib,
            "gpus": p.gpus,
            "gpu_model": p.gpu_model,
            "price_per_hour": p.price_per_hour,
            "max_nodes": p.max_nodes,
            "price_source": p.price_source,
            "price_as_of": p.price_as_of,
            "reserved_3yr_per_hour": reserved_3yr_per_hour,
        }

    @classmethod
    def from_domain(cls, p: Pool, *, reserved_3yr_per_hour: float | None = None) -> PoolRow:
        return cls(**cls.values(p, reserved_3yr_per_hour=reserved_3yr_per_hour))

    @staticmethod
    def domain_columns() -> tuple[Any, ...]:
        """The columns a domain Pool is made of, in its field order (`PoolList.from_rows` reads them)."""
        return (
            PoolRow.id,
            PoolRow.site,
            PoolRow.instance_type,
            PoolRow.capacity_type,
            PoolRow.arch,
            PoolRow.vcpus,
            PoolRow.memory_gib,
            PoolRow.gpus,
            PoolRow.gpu_model,
            PoolRow.price_per_hour,
            PoolRow.max_nodes,
            PoolRow.price_source,
            PoolRow.price_as_of,
        )

    def to_domain(self) -> Pool:
        return Pool(
            id=self.id,
            site=self.site,
            instance_type=self.instance_type,
            capacity_type=CapacityType(self.capacity_type),
            arch=Arch(self.arch),
            vcpus=self.vcpus,
            memory_gib=self.memory_gib,
            gpus=self.gpus,
            gpu_model=self.gpu_model,
            price_per_hour=self.price_per_hour,
            max_nodes=self.max_nodes,
            price_source=self.price_source,
            price_as_of=self.price_as_of,
        )


class LatencyRow(Base):
    __tablename__ = "latency"
    src: Mapped[str] = mapped_column(String(200), primary_key=True)
    dst: Mapped[str] = mapped_column(String(200), primary_key=True)
    rtt_ms: Mapped[float] = mapped_column(Float)  # the pair's median (typical) RTT
    statistic: Mapped[str] = mapped_column(String(40))
    source: Mapped[str] = mapped_column(String(80))
    rtt_p95_ms: Mapped[float | None] = mapped_column(Float, nullable=True)  # conservative; null: use rtt_ms


class EgressRow(Base):
    __tablename__ = "egress_prices"
    src: Mapped[str] = mapped_column(String(200), primary_key=True)
    dst: Mapped[str] = mapped_column(String(200), primary_key=True)  # site id, or "internet"
    usd_per_gb: Mapped[float] = mapped_column(Float)


class StoragePriceRow(Base):
    __tablename__ = "storage_prices"
    provider: Mapped[str] = mapped_column(String(40), primary_key=True)
    tier: Mapped[str] = mapped_column(String(20), primary_key=True)
    usd_per_gb_month: Mapped[float] = mapped_column(Float)
    product: Mapped[str] = mapped_column(String(80), default="")
    source: Mapped[str] = mapped_column(Text, default="")


class CatalogMetaRow(Base):
    __tablename__ = "catalog_meta"
    key: Mapped[str] = mapped_column(String(80), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
