"""Rows <-> frozen domain records by field name, so no row class copies a record's fields by hand.

A record's dataclass field `x` is stored in the column `prefix + x`, or the column that
`rename` names for it (a record whose columns do not share one prefix). Values
are converted by the field's declared type: tuples and mappings become lists and dicts
for JSON columns and come back as tuples and dicts; booleans come back as `bool`
(drivers may hand back integers). Nested records (an assignment's explanation, a
placement's result) are mapped by the caller and passed in as overrides.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

Convert = Callable[[Any], Any]


def _plain(value: Any) -> Any:
    """A JSON-ready copy: mappings as dicts, tuples and lists as lists, all the way down."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _converter(tp: Any) -> Convert | None:
    """How a stored value (not None) becomes the field's type (None: as it is)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _converter(inner[0]) if len(inner) == 1 else None
    origin = typing.get_origin(tp) or tp
    if origin is bool:
        return bool
    if origin is tuple:
        return tuple
    if origin in (dict, Mapping):
        return dict
    return None


Plan = tuple[tuple[str, str, Convert | None], ...]
_PLANS: dict[tuple[type, str, tuple[tuple[str, str], ...]], Plan] = {}


def _plan(cls: type, prefix: str, rename: Mapping[str, str] | None) -> Plan:
    """(field, column, converter) for each field of `cls`: worked out once per record type and naming."""
    key = (cls, prefix, tuple(rename.items()) if rename else ())
    plan = _PLANS.get(key)
    if plan is None:
        hints = typing.get_type_hints(cls)
        names = rename or {}
        fields = [f.name for f in dataclasses.fields(cls) if f.init]
        plan = _PLANS[key] = tuple((n, names.get(n, prefix + n), _converter(hints[n])) for n in fields)
    return plan


def to_columns(
    row_cls: type, record: Any, *, prefix: str = "", rename: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Column values of `row_cls` from the record's fields that it has a column for ({} for None)."""
    if record is None:
        return {}
    columns = row_cls.__table__.columns  # type: ignore[attr-defined]
    plan = _plan(type(record), prefix, rename)
    return {column: _plain(getattr(record, name)) for name, column, _ in plan if column in columns}


@dataclasses.dataclass(frozen=True, slots=True)
class _Reader:
    """How one call site reads a record from a row: one C-level getter for its columns, then the
    record's arguments in field order (a positional call: a ledger sync reads thousands of rows)."""

    read: Callable[[Any], tuple[Any, ...]]
    given_at: tuple[tuple[int, str], ...]  # (argument position, field) of the fields passed in, ascending
    converts: tuple[tuple[int, Convert], ...]  # (argument position, converter)


_READERS: dict[tuple[type, str, tuple[tuple[str, str], ...], tuple[str, ...]], _Reader] = {}


def _reader(cls: type, prefix: str, rename: Mapping[str, str] | None, given: tuple[str, ...]) -> _Reader:
    key = (cls, prefix, tuple(rename.items()) if rename else (), given)
    reader = _READERS.get(key)
    if reader is None:
        plan = _plan(cls, prefix, rename)
        unknown = set(given) - {n for n, _, _ in plan}
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {sorted(unknown)}")
        columns = [c for n, c, _ in plan if n not in given]
        get = operator.attrgetter(*columns)
        read = get if len(columns) > 1 else (lambda row: (get(row),))
        reader = _READERS[key] = _Reader(
            read=read,
            given_at=tuple((i, n) for i, (n, _, _) in enumerate(plan) if n in given),
            converts=tuple((i, conv) for i, (n, _, conv) in enumerate(plan) if conv is not None and n not in given),
        )
    return reader


def from_columns(
    cls: type[T], row: Any, *, prefix: str = "", rename: Mapping[str, str] | None = None, **given: Any
) -> T:
    """A `cls` record from the row's columns (an ORM row or a plain result row); `given` fields as passed."""
    reader = _reader(cls, prefix, rename, tuple(given))
    args = list(reader.read(row))
    for at, name in reader.given_at:
        args.insert(at, given[name])
    for at, convert in reader.converts:
        value = args[at]
        if value is not None:
            args[at] = convert(value)
    return cls(*args)
