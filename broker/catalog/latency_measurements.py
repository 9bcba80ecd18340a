"""A tenant's own RTT measurements in the store: import (CSV or JSON rows) and read-back.

Validation and the rule that measurements win over the catalog's figures are pure
(`broker.core.latency_measured`); this module is the I/O around them.
"""

from __future__ import annotations

import io
from collections.abc import Container, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from broker.core.latency_measured import Measurement, parse_measurements
from broker.db.latency_models import LatencyMeasurementRow
from broker.db.session import transaction
from broker.errors import InvalidRequest

CSV_COLUMNS = ("from", "to", "rtt_ms", "statistic", "source")


def read_measurements_csv(source: Path | bytes, *, loc: str = "file") -> list[dict[str, Any]]:
    """Rows of a CSV ``from,to,rtt_ms[,statistic][,source]`` as strings (validated on import)."""
    try:
        raw = io.BytesIO(source) if isinstance(source, bytes) else source
        df = pd.read_csv(raw, dtype=str, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(
            f"cannot read the measurements CSV: {exc}", errors=[{"loc": [loc], "msg": str(exc)}]
        ) from exc
    missing = [c for c in CSV_COLUMNS[:3] if c not in df.columns]
    if missing:
        raise InvalidRequest(
            f"the measurements CSV lacks column(s) {', '.join(missing)} (expected {','.join(CSV_COLUMNS)})",
            errors=[{"loc": [loc, c], "msg": "missing column"} for c in missing],
        )
    return list(df.to_dict("records"))


class MeasurementStore:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def import_rows(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        sites: Container[str],
        tenant: str = "default",
        loc: Sequence[str] = ("file",),
    ) -> dict[str, Any]:
        """Validate and store; a path measured again (same statistic and source) gets the new value.
        All or nothing."""
        parsed = parse_measurements(rows, sites, loc=loc)
        replaced = 0
        with transaction(self.sessions) as s:
            for m in parsed:
                key = {"tenant": tenant, "src": m.src, "dst": m.dst, "statistic": m.statistic, "source": m.source}
                row = s.get(LatencyMeasurementRow, key)
                if row is None:
                    s.add(LatencyMeasurementRow(**key, rtt_ms=m.rtt_ms))
                    s.flush()  # a later row of the same import may name the same path
                else:
                    row.rtt_ms = m.rtt_ms
                    replaced += 1
        return {"rows": len(parsed), "replaced": replaced, "tenant": tenant}

    def for_tenant(self, tenant: str) -> list[Measurement]:
        with self.sessions() as s:
            rows = s.scalars(select(LatencyMeasurementRow).where(LatencyMeasurementRow.tenant == tenant))
            return [
                Measurement(r.src, r.dst, "p95" if r.statistic == "p95" else "p50", r.rtt_ms, r.source) for r in rows
            ]

    def listing(self, tenant: str) -> list[dict[str, Any]]:
        return [
            {"from": m.src, "to": m.dst, "rtt_ms": m.rtt_ms, "statistic": m.statistic, "source": m.source}
            for m in sorted(self.for_tenant(tenant), key=lambda m: (m.src, m.dst, m.statistic, m.source))
        ]
