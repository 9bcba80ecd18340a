"""Right-sizing: per-replica requests from a p95 demand forecast plus headroom.

A usage series is the workload's total across its replicas (what
`sum(rate(container_cpu_usage_seconds_total[5m]))` returns). The sized request per
replica is the peak p95 over the forecast horizon, times (1 + headroom), spread over
the replicas, never below a floor (a scheduler cannot place a zero request).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.forecast.history import FloatArray

FLOORS = {"cpu": 0.05, "memory_gib": 0.125}


@dataclass(frozen=True)
class SizedResource:
    metric: str  # "cpu" (cores) or "memory_gib"
    declared: float  # per replica
    forecast: float  # per replica, sized from p95 with headroom
    p50_peak: float  # total across replicas
    p95_peak: float  # total across replicas
    method: str  # "xgboost" | "fallback:..."
    forecaster: str = ""  # what produced the p50 (the selected candidate or rule)
    backtest_mae: float | None = None  # its mean absolute error on the backtests before the origin
    regime_shift: bool = False  # the series shifted regime: a recent-level rule sized it

    @property
    def change_pct(self) -> float:
        return (self.forecast - self.declared) / self.declared * 100 if self.declared else 0.0


def size(
    metric: str,
    *,
    declared: float,
    replicas: int,
    p50: FloatArray,
    p95: FloatArray,
    headroom_pct: float,
    method: str,
    only_downsize: bool = False,
    forecaster: str = "",
    backtest_mae: float | None = None,
    regime_shift: bool = False,
) -> SizedResource:
    p95_peak = float(np.max(p95)) if len(p95) else 0.0
    per_replica = p95_peak * (1 + headroom_pct / 100) / max(replicas, 1)
    sized = max(per_replica, FLOORS.get(metric, 0.0))
    if only_downsize:
        sized = min(sized, declared)
    return SizedResource(
        metric=metric,
        declared=declared,
        forecast=round(sized, 4),
        p50_peak=round(float(np.max(p50)) if len(p50) else 0.0, 4),
        p95_peak=round(p95_peak, 4),
        method=method,
        forecaster=forecaster or method,
        backtest_mae=None if backtest_mae is None else round(backtest_mae, 4),
        regime_shift=regime_shift,
    )
