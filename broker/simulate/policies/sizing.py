"""The broker policy's requests: CPU from the demand forecast's p95 plus headroom, memory from the
observed weekly peak plus headroom.

CPU is compressible (a replica above its request is slowed, not killed), so it is sized as the
product sizes it (broker/forecast/sizing.py): the peak of the p95 forecast over the horizon,
times (1 + headroom), spread over the replicas. Memory is not (a replica above its memory is
OOM-killed), so it is sized from the highest usage of the last week, times (1 + headroom).
The forecast model is trained once, on the history before the simulated window only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.forecast.baselines import median_last_week, with_p95
from broker.forecast.history import Panel
from broker.forecast.model import ForecastModel, TrainParams, train
from broker.forecast.sizing import FLOORS
from broker.simulate.fleet import STEP_S, STEPS_PER_DAY


@dataclass
class Sizer:
    method: str  # "xgboost" | "baseline"
    horizon: int  # steps
    headroom: float  # fraction
    model: ForecastModel | None = None

    def fit(self, cpu_history: FloatArray) -> None:
        """Train on the history (the model needs two days of it; with less, the baseline sizes)."""
        if self.method == "xgboost" and cpu_history.shape[1] >= 2 * STEPS_PER_DAY:
            self.model = train(_panel(cpu_history), horizon=self.horizon, params=TrainParams(nthread=2))

    def p95_peak(self, cpu_seen: FloatArray, rows: IntArray) -> FloatArray:
        """Per workload in `rows`: the highest p95 over the next `horizon` steps (total cores)."""
        if len(rows) == 0:
            return np.zeros(0)
        if self.model is not None:
            forecasts = self.model.forecast(_panel(cpu_seen[rows]), self.horizon)
            return np.array([float(np.max(f.p95)) for f in forecasts])
        out = np.zeros(len(rows))
        for i, k in enumerate(rows.tolist()):
            _, p95 = with_p95(median_last_week, cpu_seen[k], self.horizon, STEPS_PER_DAY)
            out[i] = float(np.max(p95))
        return out

    def cpu(self, cpu_seen: FloatArray, rows: IntArray, replicas: IntArray) -> FloatArray:
        per = self.p95_peak(cpu_seen, rows) * (1.0 + self.headroom) / np.maximum(replicas[rows], 1)
        return np.maximum(per, FLOORS["cpu"])

    def memory(self, mem_seen: FloatArray, rows: IntArray, replicas: IntArray) -> FloatArray:
        week = mem_seen[rows, -7 * STEPS_PER_DAY :]
        peak = week.max(axis=1) if week.shape[1] else np.zeros(len(rows))
        return np.asarray(
            np.maximum(peak * (1.0 + self.headroom) / np.maximum(replicas[rows], 1), FLOORS["memory_gib"])
        )


def _panel(values: FloatArray) -> Panel:
    ids = [f"w{k}" for k in range(values.shape[0])]
    return Panel(
        ids=ids, starts=[0] * len(ids), values=[np.asarray(v, dtype=np.float64) for v in values], step_s=STEP_S
    )
