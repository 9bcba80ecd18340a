"""Day-ahead forecast of the last day of a window, to set against the demand that came.

The dashboard's forecast panel compares what the forecaster (the newest stored model, or
the documented baseline without one) would have said one day ahead with what the usage
history then recorded. The day compared is the last bucket-aligned day of usage in the
window. What is forecast is the total demand: every series averaged per 5-minute slot,
summed across series (the database does that, so the cost does not grow with the number
of series), over the 14 days before the compared day (all the model's features look
back that far). Its p95 is the total's own, not a sum of per-series p95s. The actual side
is aggregated alike (broker/finops/demand.py), per bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd
from sqlalchemy import func, select

from broker.db.forecast_models import UsageSampleRow
from broker.forecast.features import LONG_DAYS
from broker.forecast.history import regularize
from broker.usage.service import STEP_S, UsageStore

DAY_S = 86_400
# total demand that stops longer than this before the compared day is not forecast: the
# forecast would start inside the day, not at its start
MAX_LEAD_GAP_S = 3600


@dataclass(frozen=True)
class DayAhead:
    start: int  # Unix seconds, the compared day [start, end)
    end: int
    model_version: int | None  # None: the baseline forecaster (no model of the metric stored)
    method: str  # "xgboost" or "fallback:<baseline>"
    buckets: dict[int, tuple[float, float]]  # bucket start -> mean (p50, p95) of the total demand


def day_ahead(
    store: UsageStore,
    *,
    tenant: str | None,
    start: datetime,
    end: datetime,
    bucket_s: int,
    metric: str = "cpu",
) -> DayAhead | None:
    """The day-ahead forecast of the last day of usage in [start, end); None when there is no
    usage in the window or none in the days before it. `tenant` None: every tenant."""
    lo, hi = int(start.timestamp()), int(end.timestamp())
    tenant_cond = [] if tenant is None else [UsageSampleRow.tenant == tenant]
    with store.sessions() as s:
        last = s.scalar(
            select(func.max(UsageSampleRow.ts)).where(
                UsageSampleRow.metric == metric, UsageSampleRow.ts >= lo, UsageSampleRow.ts < hi, *tenant_cond
            )
        )
        if last is None:
            return None
        day_end = (int(last) // bucket_s + 1) * bucket_s
        day_start = max(day_end - DAY_S, lo // bucket_s * bucket_s)
        slot = (UsageSampleRow.ts // STEP_S * STEP_S).label("slot")
        per_series = (
            select(UsageSampleRow.tenant, UsageSampleRow.series, slot, func.avg(UsageSampleRow.value).label("v"))
            .where(
                UsageSampleRow.metric == metric,
                UsageSampleRow.ts >= day_start - LONG_DAYS * DAY_S,
                UsageSampleRow.ts < day_start,
                *tenant_cond,
            )
            .group_by(UsageSampleRow.tenant, UsageSampleRow.series, slot)
            .subquery()
        )
        total = s.execute(
            select(per_series.c.slot, func.sum(per_series.c.v)).group_by(per_series.c.slot).order_by(per_series.c.slot)
        ).all()
    if not total or int(total[-1][0]) + STEP_S < day_start - MAX_LEAD_GAP_S:
        return None
    slots, values = zip(*total, strict=True)
    frame = pd.DataFrame({"series_id": "total", "ts": np.asarray(slots, np.int64), "value": np.asarray(values)})
    panel = regularize(frame, step_s=STEP_S)
    first = panel.starts[0] + len(panel.values[0]) * STEP_S  # the slot after the history: step 1
    # every tenant's total (tenant None) is forecast by the operator's model, the default tenant's
    horizon = math.ceil((day_end - first) / STEP_S)
    version, (forecast,) = store.forecast(panel, metric=metric, horizon=horizon, tenant=tenant or "default")
    ts = first + STEP_S * np.arange(len(forecast.p50))
    inside = (ts >= day_start) & (ts < day_end)
    buckets = ts[inside] // bucket_s * bucket_s
    p50, p95 = forecast.p50[inside], forecast.p95[inside]
    return DayAhead(
        start=day_start,
        end=day_end,
        model_version=version,
        method=forecast.method,
        buckets={
            int(b): (float(p50[buckets == b].mean()), float(p95[buckets == b].mean())) for b in np.unique(buckets)
        },
    )
