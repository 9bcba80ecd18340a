"""Hold-out evaluation: train on everything but the last N points, score model and baselines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from broker.forecast import baselines
from broker.forecast.features import steps_per_day
from broker.forecast.history import FloatArray, HistoryError, Panel
from broker.forecast.model import Forecast, ForecastModel, TrainParams, train
from broker.forecast.select import SelectedForecaster, SelectParams, fit_selected


@dataclass(frozen=True)
class Scores:
    mae: float
    smape: float  # percent, 0..200
    p95_coverage: float  # percent of actuals at or below p95
    points: int


def score(actual: FloatArray, p50: FloatArray, p95: FloatArray) -> Scores:
    ok = np.isfinite(actual)
    a, f, u = actual[ok], p50[ok], p95[ok]
    if not len(a):
        return Scores(float("nan"), float("nan"), float("nan"), 0)
    denom = np.abs(a) + np.abs(f)
    smape = np.where(denom > 0, 200.0 * np.abs(a - f) / np.where(denom > 0, denom, 1.0), 0.0)
    return Scores(float(np.mean(np.abs(a - f))), float(np.mean(smape)), float(np.mean(a <= u) * 100), len(a))


@dataclass
class Evaluation:
    horizon: int
    scores: dict[str, Scores]  # "xgboost" and each baseline (and "selected" with a selection)
    forecasts: list[Forecast]  # the model's
    model: ForecastModel
    fallbacks: list[str] = field(default_factory=list)  # series served by a baseline
    selected: list[Forecast] = field(default_factory=list)  # the selected forecaster's, with `select`
    selector: SelectedForecaster | None = None

    def ratio(self, name: str, to: str = "seasonal_naive") -> float:
        return self.scores[name].mae / self.scores[to].mae if self.scores[to].mae else float("nan")


def evaluate(
    panel: Panel,
    *,
    horizon: int = 288,
    params: TrainParams | None = None,
    select: SelectParams | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> Evaluation:
    """Hold out the last `horizon` points; with `select`, the selected forecaster (backtests,
    choice, conformal band: broker.forecast.select) is fitted on the rest and scored too."""
    if horizon < 1:
        raise HistoryError("the horizon must be at least 1 step", [{"loc": ["horizon"], "msg": "< 1"}])
    history, held = panel.split(horizon)
    day = steps_per_day(panel.step_s)
    progress(f"training on {history.n_points():,} points of {len(history)} series")
    selector = fit_selected(history, horizon=horizon, params=params, select=select) if select else None
    model = selector.model if selector else train(history, horizon=horizon, params=params)
    progress(f"forecasting {horizon} steps for {len(history)} series")
    forecasts = model.forecast(history, horizon)
    actual = np.concatenate([_pad(a, horizon) for a in held])
    scores = {
        "xgboost": score(actual, np.concatenate([f.p50 for f in forecasts]), np.concatenate([f.p95 for f in forecasts]))
    }
    selected = selector.forecast(history, horizon) if selector else []
    if selected:
        p50, p95 = np.concatenate([f.p50 for f in selected]), np.concatenate([f.p95 for f in selected])
        scores = {"selected": score(actual, p50, p95), **scores}
    for name, fn in baselines.BASELINES.items():
        pairs = [baselines.with_p95(fn, y, horizon, day) for y in history.values]
        scores[name] = score(actual, np.concatenate([p for p, _ in pairs]), np.concatenate([u for _, u in pairs]))
    fallbacks = [f.series_id for f in forecasts if f.method != "xgboost"]
    return Evaluation(horizon, scores, forecasts, model, fallbacks, selected, selector)


def _pad(a: FloatArray, horizon: int) -> FloatArray:
    """A series shorter than the horizon has nothing held out beyond its length: NaN (unscored)."""
    return a if len(a) == horizon else np.concatenate((np.full(horizon - len(a), np.nan), a))


def predictions_frame(panel: Panel, forecasts: list[Forecast], horizon: int) -> pd.DataFrame:
    """series_id,timestamp,p50,p95 for the held-out steps (timestamps in the input's style)."""
    frames = []
    for i, f in enumerate(forecasts):
        n_hist = len(panel.values[i]) - horizon
        ts = panel.starts[i] + (n_hist + np.arange(horizon, dtype=np.int64)) * panel.step_s
        stamp: object = (
            ts if panel.numeric_time else pd.to_datetime(ts, unit="s", utc=True).strftime("%Y-%m-%dT%H:%M:%SZ")
        )
        frames.append(pd.DataFrame({"series_id": f.series_id, "timestamp": stamp, "p50": f.p50, "p95": f.p95}))
    return pd.concat(frames, ignore_index=True).round({"p50": 4, "p95": 4})


# what the selected forecaster's p95 promises: 95 % of actuals at or below it; docs/forecast.md
# counts 90-98 % as met on the benchmark traces (weeks of history per series)
P95_PROMISE_PCT = 95.0
P95_MET_RANGE = (90.0, 98.0)


def best_fixed_rule(scores: dict[str, Scores], rules: tuple[str, ...]) -> str:
    """The fixed rule with the lowest MAE in these scores (the table the user reads)."""
    return min((r for r in rules if r in scores), key=lambda r: scores[r].mae)


def coverage_note(coverage_pct: float) -> str:
    """The selected forecaster's p95 coverage against what it promises, said plainly."""
    low, high = P95_MET_RANGE
    said = f"selected p95 coverage {coverage_pct:.1f} % (promised {P95_PROMISE_PCT:g} %"
    if low <= coverage_pct <= high:
        return f"{said}: met, within {low:g}-{high:g} %)"
    off = coverage_pct - P95_PROMISE_PCT
    way = "below: its p95 is too low for" if off < 0 else "above: its p95 is wider than needed for"
    return (
        f"{said}): {abs(off):.1f} points {way} this history; the band is calibrated on backtests "
        "of the history itself, so a few days per series calibrate it poorly (docs/forecast.md)"
    )
