"""FOCUS rows to Arrow, CSV and Parquet (pyarrow), with the FOCUS data types as Arrow types."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from broker.finops.focus import FOCUS_COLUMNS, FOCUS_VERSION

ARROW_TYPES: dict[str, pa.DataType] = {
    "String": pa.string(),
    "JSON": pa.string(),
    "Decimal": pa.decimal128(38, 10),
    "DateTime": pa.timestamp("us", tz="UTC"),
}


def focus_schema() -> pa.Schema:
    return pa.schema(
        [pa.field(name, ARROW_TYPES[kind], nullable=True) for name, kind in FOCUS_COLUMNS],
        metadata={"focus_version": FOCUS_VERSION, "generator": "placement-broker"},
    )


def to_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    schema = focus_schema()
    return pa.Table.from_pydict({f.name: [r[f.name] for r in rows] for f in schema}, schema=schema)


def to_parquet(rows: Sequence[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(to_table(rows), buf, compression="zstd")
    return buf.getvalue()


def to_csv(rows: Sequence[dict[str, Any]]) -> bytes:
    """RFC 4180 CSV with a header; DateTime as ISO 8601 UTC ('Z'), nulls as empty fields."""
    table = to_table(rows)
    # Arrow writes timestamps as "2026-12-01 00:00:00.000000Z"; FOCUS wants ISO 8601 with a 'T'
    cols = []
    for f, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_timestamp(f.type):
            seconds = pc.cast(col, pa.timestamp("s", tz="UTC"), safe=False)
            col = pc.strftime(seconds, format="%Y-%m-%dT%H:%M:%SZ")
        cols.append(col)
    table = pa.Table.from_arrays(cols, names=table.column_names)
    buf = io.BytesIO()
    pa_csv.write_csv(table, buf, pa_csv.WriteOptions(quoting_style="needed"))
    return buf.getvalue()
