"""Actual demand for the dashboard's forecast panel, read from the usage samples.

Each series' samples are averaged per bucket, then summed across series, so a
5-minute series and an hourly one weigh the same per hour.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from broker.db.forecast_models import UsageSampleRow

METRIC = "cpu"


def bucket_seconds(start: datetime, end: datetime) -> int:
    """Hourly points up to a week, daily beyond."""
    return 3600 if end - start <= timedelta(days=7) else 86400


def actual_demand(
    factory: sessionmaker[Session], *, tenant: str | None, start: datetime, end: datetime
) -> list[dict[str, Any]] | None:
    """Per-bucket total demand in [start, end), or None when the usage table is not migrated."""
    bucket = bucket_seconds(start, end)
    b = (UsageSampleRow.ts // bucket * bucket).label("b")
    conds = [UsageSampleRow.metric == METRIC, UsageSampleRow.ts >= int(start.timestamp()),
             UsageSampleRow.ts < int(end.timestamp())]  # fmt: skip
    if tenant is not None:
        conds.append(UsageSampleRow.tenant == tenant)
    per_series = (
        select(UsageSampleRow.series, b, func.avg(UsageSampleRow.value).label("v"))
        .where(*conds)
        .group_by(UsageSampleRow.series, b)
        .subquery()
    )
    try:
        with factory() as s:
            rows = s.execute(
                select(per_series.c.b, func.sum(per_series.c.v)).group_by(per_series.c.b).order_by(per_series.c.b)
            ).all()
    except SQLAlchemyError:
        return None  # the usage table is not migrated in this database
    return [
        {"timestamp": datetime.fromtimestamp(int(t), UTC).isoformat(), "actual": float(v), "p50": None, "p95": None}
        for t, v in rows
    ]
