"""Rolling-origin evaluation: each of the last K horizons held out in turn, everything fitted on
what precedes it, every forecaster scored per horizon ("day") and pooled over the K days.

Scored: `selected` (the product's forecaster, broker.forecast.select), `xgboost` (the model
alone, trained on the same history) and the fixed rules (seasonal-naive, weekly median of
the slot, its blend with seasonal-naive, medians of the last 7 and 14 days), each with the
p95 band of `baselines.with_p95`. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from broker.forecast import baselines
from broker.forecast.evaluate import Scores, score
from broker.forecast.features import steps_per_day
from broker.forecast.history import FloatArray, HistoryError, Panel
from broker.forecast.model import Forecast, TrainParams
from broker.forecast.select import SelectParams, fit_selected

FIXED_RULES = ("seasonal_naive", "weekly_median", "blend_yday_weekly", "median_last_week", "median_last_2_weeks")
# the yardstick: the better of these two over all days, one rule for every day
YARDSTICK_RULES = ("weekly_median", "blend_yday_weekly")


@dataclass
class Day:
    back: int  # 0 = the last horizon, 1 = the one before, ...
    scores: dict[str, Scores]
    fleet: str  # the candidate the selection chose for the panel
    choices: Counter[str]  # series per forecaster
    regime_shifts: int


@dataclass
class RollingEvaluation:
    horizon: int
    days: list[Day]  # oldest first
    pooled: dict[str, Scores] = field(default_factory=dict)  # every day's points together
    last: list[Forecast] = field(default_factory=list)  # the selected forecasts of the last horizon

    def ratio(self, name: str, to: str = "seasonal_naive", day: Day | None = None) -> float:
        s = day.scores if day is not None else self.pooled
        return s[name].mae / s[to].mae if s[to].mae else float("nan")

    def better_rule(self) -> str:
        """The better yardstick rule over all days (one rule for every day)."""
        return min(YARDSTICK_RULES, key=lambda n: self.pooled[n].mae)


def rolling_origin(
    panel: Panel,
    *,
    days: int,
    horizon: int = 288,
    params: TrainParams | None = None,
    select: SelectParams | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> RollingEvaluation:
    if days < 1 or horizon < 1:
        raise HistoryError("--days and --horizon must be at least 1", [{"loc": ["days"], "msg": "< 1"}])
    if max((len(v) for v in panel.values), default=0) <= days * horizon + steps_per_day(panel.step_s) + 2:
        raise HistoryError(
            f"too little history for {days} held-out horizon(s) of {horizon} steps plus a day to train on",
            [{"loc": ["days"], "msg": "too many days for the history"}],
        )
    day = steps_per_day(panel.step_s)
    out: list[Day] = []
    points: dict[str, list[tuple[FloatArray, FloatArray, FloatArray]]] = {}
    for back in range(days - 1, -1, -1):
        upto = panel.split(horizon * back)[0] if back else panel
        history, held = upto.split(horizon)
        actual = np.concatenate([_pad(a, horizon) for a in held])
        progress(f"day -{back}: selecting and training on {history.n_points():,} points")
        fitted = fit_selected(history, horizon=horizon, params=params, select=select)
        chosen = fitted.forecast(history, horizon)
        plain = fitted.model.forecast(history, horizon)
        series: dict[str, tuple[FloatArray, FloatArray]] = {
            "selected": (np.concatenate([f.p50 for f in chosen]), np.concatenate([f.p95 for f in chosen])),
            "xgboost": (np.concatenate([f.p50 for f in plain]), np.concatenate([f.p95 for f in plain])),
        }
        for name in FIXED_RULES:
            pairs = [baselines.with_p95(baselines.BASELINES[name], y, horizon, day) for y in history.values]
            series[name] = (np.concatenate([p for p, _ in pairs]), np.concatenate([u for _, u in pairs]))
        scores = {}
        for name, (p50, p95) in series.items():
            scores[name] = score(actual, p50, p95)
            points.setdefault(name, []).append((actual, p50, p95))
        out.append(
            Day(
                back,
                scores,
                fitted.fleet,
                Counter(f.forecaster or f.method for f in chosen),
                sum(f.regime_shift for f in chosen),
            )
        )
    pooled = {name: score(*(np.concatenate([p[k] for p in parts]) for k in range(3))) for name, parts in points.items()}
    return RollingEvaluation(horizon, out, pooled, chosen)


def _pad(a: FloatArray, horizon: int) -> FloatArray:
    return a if len(a) == horizon else np.concatenate((np.full(horizon - len(a), np.nan), a))
