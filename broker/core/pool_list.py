"""A table's pools as columns, each Pool object made the first time it is asked for.

The full catalog has ~190k pools. As objects they were most of what a process paid to read its
cached catalog (each one a constructor call when unpickled) and to build it, while a request
looks at a few hundred of them (its answer's pools, a listing's page); the solver reads the
table's numpy columns, not these.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from operator import index
from typing import Any, SupportsIndex, overload

from broker.core.domain import Arch, CapacityType, Pool

# Pool's fields, in its constructor's order: the columns of a PoolList
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Pool))
_CAPACITY = {c.value: c for c in CapacityType}
_ARCH = {a.value: a for a in Arch}


class PoolList(Sequence[Pool]):
    """Immutable, like the tuple it replaces; equal objects come back for the same index."""

    __slots__ = ("_columns", "_made")

    def __init__(self, columns: Sequence[Sequence[Any]]) -> None:
        if len(columns) != len(FIELDS):
            raise ValueError(f"a PoolList has {len(FIELDS)} columns, got {len(columns)}")
        self._columns: tuple[tuple[Any, ...], ...] = tuple(tuple(c) for c in columns)
        if len({len(c) for c in self._columns}) > 1:
            raise ValueError("a PoolList's columns differ in length")
        self._made: list[Pool | None] = [None] * len(self._columns[0])

    @classmethod
    def of(cls, pools: Iterable[Pool]) -> PoolList:
        rows = [tuple(getattr(p, f) for f in FIELDS) for p in pools]
        return cls(list(zip(*rows, strict=True)) if rows else [()] * len(FIELDS))

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]]) -> PoolList:
        """From stored rows in FIELDS' order, capacity type and architecture as their values
        (strings), GPUs None for none."""
        if not rows:
            return cls([()] * len(FIELDS))
        cols: list[Sequence[Any]] = list(zip(*rows, strict=True))
        cols[3] = [_CAPACITY[c] for c in cols[3]]
        cols[4] = [_ARCH[a] for a in cols[4]]
        cols[7] = [g or 0.0 for g in cols[7]]
        return cls(cols)

    def column(self, name: str) -> tuple[Any, ...]:
        """One field of every pool, in order (no Pool objects made)."""
        return self._columns[FIELDS.index(name)]

    @property
    def ids(self) -> tuple[str, ...]:
        return self._columns[0]

    def take(self, indices: Iterable[int]) -> PoolList:
        idx = list(indices)
        return PoolList([[c[i] for i in idx] for c in self._columns])

    def __len__(self) -> int:
        return len(self._made)

    @overload
    def __getitem__(self, i: SupportsIndex) -> Pool: ...

    @overload
    def __getitem__(self, i: slice) -> PoolList: ...

    def __getitem__(self, i: SupportsIndex | slice) -> Pool | PoolList:
        if isinstance(i, slice):
            return self.take(range(*i.indices(len(self))))
        i = index(i)  # numpy integers too
        made = self._made[i]
        if made is None:
            made = Pool(*(c[i] for c in self._columns))
            self._made[i] = made
        return made

    def __iter__(self) -> Iterator[Pool]:
        for i in range(len(self)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PoolList):
            return self._columns == other._columns
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PoolList({len(self)} pools)"

    def __reduce__(self) -> tuple[type[PoolList], tuple[tuple[tuple[Any, ...], ...]]]:
        return (PoolList, (self._columns,))
