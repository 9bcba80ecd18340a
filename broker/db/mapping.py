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
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
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


@cache
def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


@cache
def _plan(cls: type, prefix: str, rename: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str, Convert | None], ...]:
    """(field, column, converter) for each field of `cls`: worked out once per record type and naming."""
    hints = typing.get_type_hints(cls)
    names = dict(rename)
    return tuple((name, names.get(name, prefix + name), _converter(hints[name])) for name in _fields(cls))


def to_columns(
    row_cls: type, record: Any, *, prefix: str = "", rename: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Column values of `row_cls` from the record's fields that it has a column for ({} for None)."""
    if record is None:
        return {}
    columns = row_cls.__table__.columns  # type: ignore[attr-defined]
    plan = _plan(type(record), prefix, tuple(rename.items()) if rename else ())
    return {column: _plain(getattr(record, name)) for name, column, _ in plan if column in columns}


def from_columns(
    cls: type[T], row: Any, *, prefix: str = "", rename: Mapping[str, str] | None = None, **given: Any
) -> T:
    """A `cls` record from the row's columns (an ORM row or a plain result row); `given` fields as passed."""
    for name, column, convert in _plan(cls, prefix, tuple(rename.items()) if rename else ()):
        if name not in given:
            value = getattr(row, column)
            given[name] = value if convert is None or value is None else convert(value)
    return cls(**given)
