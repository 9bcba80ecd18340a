"""Rows <-> records by field name: prefixes, renames, JSON-ready values and the types they come back as."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType, SimpleNamespace

from sqlalchemy import JSON, Boolean, Float, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from broker.db.mapping import from_columns, to_columns


class _Base(DeclarativeBase):
    pass


class _Row(_Base):
    __tablename__ = "mapping_rows"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tags: Mapped[list[str]] = mapped_column(JSON)
    limits: Mapped[dict[str, float]] = mapped_column(JSON)
    on: Mapped[bool] = mapped_column(Boolean)
    price_per_hour: Mapped[float | None] = mapped_column(Float, nullable=True)
    price_source: Mapped[str | None] = mapped_column(String, nullable=True)


@dataclass(frozen=True)
class _Record:
    tags: tuple[str, ...]
    limits: Mapping[str, Mapping[str, float]]
    on: bool
    note: str = "not a column"


@dataclass(frozen=True)
class _Price:
    price_per_hour: float
    source: str | None


def test_fields_with_a_column_become_json_ready_values() -> None:
    rec = _Record(("a", "b"), MappingProxyType({"eu": MappingProxyType({"p95": 1.5})}), True)
    cols = to_columns(_Row, rec)
    assert cols == {"tags": ["a", "b"], "limits": {"eu": {"p95": 1.5}}, "on": True}
    assert type(cols["limits"]["eu"]) is dict  # JSON columns cannot store a mappingproxy


def test_prefix_and_rename_name_the_columns_both_ways() -> None:
    naming = {"prefix": "price_", "rename": {"price_per_hour": "price_per_hour"}}
    assert to_columns(_Row, _Price(0.5, "aws"), **naming) == {"price_per_hour": 0.5, "price_source": "aws"}
    assert to_columns(_Row, None, **naming) == {}
    row = SimpleNamespace(price_per_hour=0.5, price_source=None)
    assert from_columns(_Price, row, **naming) == _Price(0.5, None)


def test_stored_values_come_back_as_the_declared_types() -> None:
    row = SimpleNamespace(tags=["a"], limits={"eu": {"p95": 1.5}}, on=1, note="n")
    got = from_columns(_Record, row)
    assert got == _Record(("a",), {"eu": {"p95": 1.5}}, True, "n")
    assert type(got.tags) is tuple and got.on is True
    assert from_columns(_Record, SimpleNamespace(tags=[], limits={}, on=0), note="given").note == "given"
