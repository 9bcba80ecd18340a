"""The broker policy's requests: CPU from the demand forecast's p95 plus headroom, memory from the
observed weekly peak plus headroom.

CPU is compressible (a replica above its request is slowed, not killed), so it is sized as the
product sizes it (broker/forecast/sizing.py): the peak of the p95 forecast over the horizon,
times (1 + headroom), spread over the replicas. Memory is not (a replica above its memory is
OOM-killed), so it is sized from the highest usage of the last week, times (1 + headroom).
The forecast model is trained once, on the history before the simulated window only.

Calibrated headroom (`calibrate`): one headroom for every workload starves the spiky ones,
whose rare bursts the p95 never sees. So the last three horizons of the history are held out: a
model trained on what precedes them forecasts each from its start (rolling origins), and each
workload's headroom becomes what would have covered its highest held-out peak (actual peak /
forecast p95 peak - 1), never below the configured headroom, and the request it gives never
above the workload's declared request (unless the configured headroom alone asks for more).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from broker.core.pooltable import FloatArray, IntArray
from broker.forecast.baselines import median_last_week
from broker.forecast.history import Panel
from broker.forecast.model import ForecastModel, TrainParams, train
from broker.forecast.sizing import FLOORS
from broker.simulate.fleet import STEP_S, STEPS_PER_DAY

MAX_HEADROOM = 4.0  # as BrokerPolicyIn.headroom_pct allows at most


@dataclass
class Sizer:
    method: str  # "xgboost" | "baseline"
    horizon: int  # steps
    headroom: float  # fraction
    calibrate: bool = False
    held_out: int = 3  # horizons held out to calibrate on: one is a single sample of a rare burst
    model: ForecastModel | None = None
    headroom_k: FloatArray | None = None  # per workload, when calibrated

    def fit(self, cpu_history: FloatArray) -> None:
        """Train on the history (the model needs two days of it; with less, the baseline sizes)."""
        self.model = self._train(cpu_history)
        if self.calibrate:
            self.headroom_k = self._held_out_headroom(cpu_history)

    def _train(self, cpu_history: FloatArray) -> ForecastModel | None:
        if self.method == "xgboost" and cpu_history.shape[1] >= 2 * STEPS_PER_DAY:
            return train(_panel(cpu_history), horizon=self.horizon, params=TrainParams(nthread=2))
        return None

    def _held_out_headroom(self, cpu_history: FloatArray) -> FloatArray:
        """Per workload, the headroom over the p95 peak that covered the peak of each of the last
        `held_out` horizons (rolling origins), forecast by a model trained on what precedes them
        all; the configured headroom where no horizon has two days before it."""
        n, steps = cpu_history.shape
        need = np.full(n, self.headroom)
        windows = min(self.held_out, (steps - 2 * STEPS_PER_DAY) // self.horizon)
        if windows < 1:
            return need
        first = steps - windows * self.horizon
        model = self._train(cpu_history[:, :first])
        rows = np.arange(n)
        for origin in range(first, steps, self.horizon):
            peak = self._p95_peak(model, cpu_history[:, :origin], rows)
            actual = np.nanmax(np.nan_to_num(cpu_history[:, origin : origin + self.horizon], nan=0.0), axis=1)
            ratio = np.divide(actual, peak, out=np.where(actual > 0, np.inf, 1.0), where=peak > 0)
            need = np.maximum(need, ratio - 1.0)
        return np.asarray(np.clip(need, self.headroom, max(MAX_HEADROOM, self.headroom)))

    def p95_peak(self, cpu_seen: FloatArray, rows: IntArray) -> FloatArray:
        """Per workload in `rows`: the highest p95 over the next `horizon` steps (total cores)."""
        return self._p95_peak(self.model, cpu_seen, rows)

    def _p95_peak(self, model: ForecastModel | None, cpu_seen: FloatArray, rows: IntArray) -> FloatArray:
        if len(rows) == 0:
            return np.zeros(0)
        if model is not None:
            forecasts = model.forecast(_panel(cpu_seen[rows]), self.horizon)
            return np.array([float(np.max(f.p95)) for f in forecasts])
        # the baseline reads the last eight days: only those are copied
        return baseline_p95_peak(cpu_seen[:, -8 * STEPS_PER_DAY :][rows], STEPS_PER_DAY)

    def cpu(
        self, cpu_seen: FloatArray, rows: IntArray, replicas: IntArray, declared: FloatArray | None = None
    ) -> FloatArray:
        """Per replica of the workloads in `rows`; `declared`: per workload, the declared request
        per replica, which a calibrated headroom does not push the request past."""
        peak = self.p95_peak(cpu_seen, rows)
        reps = np.maximum(replicas[rows], 1)
        per = peak * (1.0 + self.headroom) / reps
        if self.headroom_k is not None:
            wide = peak * (1.0 + self.headroom_k[rows]) / reps
            per = np.maximum(per, wide if declared is None else np.minimum(wide, declared[rows]))
        return np.maximum(per, FLOORS["cpu"])

    def memory(self, mem_seen: FloatArray, rows: IntArray, replicas: IntArray) -> FloatArray:
        week = mem_seen[rows, -7 * STEPS_PER_DAY :]
        peak = week.max(axis=1) if week.shape[1] else np.zeros(len(rows))
        return np.asarray(
            np.maximum(peak * (1.0 + self.headroom) / np.maximum(replicas[rows], 1), FLOORS["memory_gib"])
        )


def baseline_p95_peak(values: FloatArray, day: int) -> FloatArray:
    """Per row, the peak of `with_p95(median_last_week, row, horizon, day)`, all rows at once (a
    call per workload made every re-size of a big fleet cost seconds). The forecast is flat, so
    its peak is the last week's median plus the 95th percentile of the errors that median (of the
    week before the last day) made on the last day, when there are two days."""
    rows, n = values.shape
    if rows == 0 or n == 0:
        return np.zeros(rows)
    point = _flat_week_median(values, day)
    if n <= 2 * day:
        return point
    err = values[:, -day:] - _flat_week_median(values[:, :-day], day)[:, None]
    finite = np.isfinite(err)
    margin = np.zeros(rows)
    full = finite.all(axis=1)
    if full.any():
        margin[full] = np.quantile(err[full], 0.95, axis=1)
    for i in np.flatnonzero(~full & finite.any(axis=1)).tolist():  # gaps: as with_p95, over what is there
        margin[i] = float(np.quantile(err[i][finite[i]], 0.95))
    return np.asarray(point + np.maximum(margin, 0.0), dtype=np.float64)


def _flat_week_median(values: FloatArray, day: int) -> FloatArray:
    """median_last_week's level per row: the median of the last 7 days, else the last value seen."""
    recent = values[:, -7 * day :]
    ok = np.isfinite(recent)
    out = np.zeros(len(values))
    full = ok.all(axis=1)
    if full.any():
        out[full] = np.median(recent[full], axis=1)
    for i in np.flatnonzero(~full).tolist():
        out[i] = float(median_last_week(values[i], 1, day)[0])
    return out


def _panel(values: FloatArray) -> Panel:
    ids = [f"w{k}" for k in range(values.shape[0])]
    return Panel(
        ids=ids, starts=[0] * len(ids), values=[np.asarray(v, dtype=np.float64) for v in values], step_s=STEP_S
    )
