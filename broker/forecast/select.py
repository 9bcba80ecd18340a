"""The forecaster the product uses: chosen from backtests before the origin, calibrated on them.

`fit_selected(history)` trains a backtest model on the history minus its last `backtest_days`
horizons, forecasts each of those horizons from its own origin with the model, the robust
rules and their combinations, and keeps, for the whole panel (one cluster: the series a model
is trained on), the candidate with the lowest pooled backtest MAE. Per series it then

- tests for a regime shift: the chosen candidate's residuals over the last hours of the most
  recent backtest horizon against those of the earlier ones (Mann-Whitney U, and a shift of
  the median residual larger than `shift_factor` x the earlier mean absolute error). A shifted
  series falls back to the recent-level rule (`fallback`): the backtests describe a regime
  that is over;
- calibrates the p95 band (split conformal): p95 = p50 + the `band_level` quantile of the
  series' own backtest residuals of its forecaster.

Nothing after the origin is read: backtests see only the history given, the final model is
trained on the same history. The final model then serves the forecasts. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import mannwhitneyu

from broker.forecast import baselines
from broker.forecast.features import steps_per_day
from broker.forecast.history import FloatArray, Panel
from broker.forecast.model import Forecast, ForecastModel, TrainParams, train

MODEL = "xgboost"
RECENT = "median_last_6h"
# (how, members): the model alone, and the model hedged with a recent level and a long one;
# measured in docs/forecast.md (pure rules lost to these on the backtests of both traces)
COMBINATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mean", (MODEL,)),
    ("mean", (MODEL, RECENT)),
    ("mean", (MODEL, "weekly_median", RECENT)),
    ("mean", (MODEL, "median_last_2_weeks", RECENT)),
    ("median", (MODEL, "weekly_median", RECENT)),
    ("median", (MODEL, "median_last_2_weeks", RECENT)),
    ("median", (MODEL, "seasonal_naive", RECENT)),
)


def candidate_name(how: str, members: tuple[str, ...]) -> str:
    return members[0] if len(members) == 1 else f"{how}({','.join(members)})"


CANDIDATES = [candidate_name(h, m) for h, m in COMBINATIONS]


@dataclass(frozen=True)
class SelectParams:
    backtest_days: int = 3  # horizons held out before the origin, each forecast from its own origin
    band_level: float = 0.97  # quantile of backtest residuals added to the p50 (docs: why not 0.95)
    shift_hours: float = 6.0  # the recent window of the regime-shift test
    shift_factor: float = 3.0  # a shift must exceed this x the earlier mean absolute error
    shift_alpha: float = 1e-3  # and be significant at this level (Mann-Whitney U)
    fallback: str = RECENT  # the rule a shifted series falls back to


@dataclass(frozen=True)
class Choice:
    forecaster: str  # a candidate name, or the fallback rule
    backtest_mae: float | None  # mean absolute error of that forecaster on the backtests (units of the series)
    margin: float | None  # conformal p95 - p50 (None: no backtest, the model's own band)
    regime_shift: bool = False


@dataclass
class Backtest:
    """Residuals (actual - p50) per candidate: (blocks, series, horizon), oldest block first."""

    ids: list[str]
    residuals: dict[str, FloatArray]

    @property
    def blocks(self) -> int:
        return next(iter(self.residuals.values())).shape[0] if self.residuals else 0


def member_points(
    model: ForecastModel, panel: Panel, horizon: int, fallback: str = RECENT
) -> tuple[dict[str, FloatArray], list[Forecast]]:
    """Point forecasts (series, horizon) of the model, of every rule a candidate uses and of the
    fallback rule; and the model's own forecasts."""
    day = steps_per_day(panel.step_s)
    forecasts = model.forecast(panel, horizon)
    out = {MODEL: np.stack([f.p50 for f in forecasts])}
    rules = {m for _, members in COMBINATIONS for m in members if m != MODEL} | {fallback}
    for name in sorted(rules):
        if name == "weekly_median":
            out[name] = baselines.weekly_median_many(panel.values, horizon, day)
            continue
        fn = baselines.BASELINES[name]
        out[name] = np.stack([fn(y, horizon, day) for y in panel.values])
    return out, forecasts


def candidate_points(members: dict[str, FloatArray], fallback: str = RECENT) -> dict[str, FloatArray]:
    out = {}
    for how, names in COMBINATIONS:
        stack = np.stack([members[n] for n in names])
        out[candidate_name(how, names)] = stack.mean(axis=0) if how == "mean" else np.median(stack, axis=0)
    out.setdefault(fallback, members[fallback])
    return out


def backtest(model: ForecastModel, panel: Panel, horizon: int, blocks: int, fallback: str = RECENT) -> Backtest:
    """Forecast each of the last `blocks` horizons of every series from the origin just before it
    (the model and the rules see the history up to that origin only) and keep the residuals."""
    res: dict[str, list[FloatArray]] = {}
    for j in range(blocks, 0, -1):
        upto = panel.split(horizon * (j - 1))[0] if j > 1 else panel
        history, held = upto.split(horizon)
        actual = np.stack([_pad(a, horizon) for a in held])
        members, _ = member_points(model, history, horizon, fallback)
        for name, p in candidate_points(members, fallback).items():
            res.setdefault(name, []).append(actual - p)
    return Backtest(list(panel.ids), {n: np.stack(r) for n, r in res.items()})


def _pad(a: FloatArray, horizon: int) -> FloatArray:
    return a if len(a) == horizon else np.concatenate((np.full(horizon - len(a), np.nan), a))


def fleet_choice(bt: Backtest) -> str:
    """The candidate with the lowest pooled backtest MAE over every series and block (the model
    on a tie or without backtests)."""
    best, best_loss = MODEL, math.inf
    for name in CANDIDATES:
        r = bt.residuals.get(name)
        if r is None or not np.isfinite(r).any():
            continue
        loss = float(np.nanmean(np.abs(r)))
        if loss < best_loss - 1e-12:
            best, best_loss = name, loss
    return best


def regime_shift(recent: FloatArray, earlier: FloatArray, params: SelectParams) -> bool:
    """Did the residuals move to another level? Significant (Mann-Whitney U) and material (larger
    than `shift_factor` x the earlier mean absolute error: residuals are autocorrelated, so a
    p-value alone flags harmless drifts)."""
    r, e = recent[np.isfinite(recent)], earlier[np.isfinite(earlier)]
    if len(r) < 10 or len(e) < 10:
        return False
    shift = abs(float(np.median(r) - np.median(e)))
    if shift <= params.shift_factor * max(float(np.mean(np.abs(e))), 1e-9):
        return False
    return bool(mannwhitneyu(r, e).pvalue < params.shift_alpha)


def conformal_margin(residuals: FloatArray, level: float) -> float | None:
    """Split-conformal band: the `level` quantile (finite-sample, "higher") of the residuals, >= 0."""
    r = residuals[np.isfinite(residuals)]
    if not len(r):
        return None
    q = min(1.0, math.ceil(level * (len(r) + 1)) / len(r))
    return max(0.0, float(np.quantile(r, q, method="higher")))


def choose(bt: Backtest, fleet: str, params: SelectParams, day: int) -> dict[str, Choice]:
    """Per series: the fleet's candidate, or the fallback rule after a regime shift, with its
    backtest MAE and conformal margin."""
    window = max(3, round(day * params.shift_hours / 24))
    out = {}
    base = bt.residuals.get(fleet)
    for i, sid in enumerate(bt.ids):
        name, shifted = fleet, False
        if base is not None and bt.blocks >= 2:
            shifted = regime_shift(base[-1, i, -window:], base[:-1, i].ravel(), params)
            name = params.fallback if shifted else fleet
        r = bt.residuals[name][:, i].ravel() if name in bt.residuals else np.empty(0)
        mae = float(np.nanmean(np.abs(r))) if np.isfinite(r).any() else None
        out[sid] = Choice(name, mae, conformal_margin(r, params.band_level), shifted)
    return out


@dataclass
class SelectedForecaster:
    """The final model, the panel's chosen candidate, and each known series' choice and band."""

    model: ForecastModel
    fleet: str
    choices: dict[str, Choice]
    params: SelectParams = field(default_factory=SelectParams)
    backtest_days: int = 0  # horizons the choices were backtested on (0: none were possible)

    def choices_for(self, panel: Panel, horizon: int) -> dict[str, Choice]:
        """Stored choices; series unknown to the selection are backtested now with the final model
        (it has never seen them, so that is out of sample too)."""
        unknown = [i for i, s in enumerate(panel.ids) if s not in self.choices]
        if not unknown:
            return self.choices
        sub = Panel(
            [panel.ids[i] for i in unknown],
            [panel.starts[i] for i in unknown],
            [panel.values[i] for i in unknown],
            panel.step_s,
            panel.numeric_time,
        )
        blocks = _blocks(sub, horizon, self.params.backtest_days)
        day = steps_per_day(panel.step_s)
        if blocks:
            bt = backtest(self.model, sub, horizon, blocks, self.params.fallback)
            fresh = choose(bt, self.fleet, self.params, day)
        else:
            fresh = {s: Choice(self.fleet, None, None) for s in sub.ids}
        return {**self.choices, **fresh}

    def forecast(self, panel: Panel, horizon: int | None = None) -> list[Forecast]:
        """p50/p95 of every series; `method` stays the model's ("xgboost" or its fallback),
        `forecaster` names what produced the p50."""
        h = horizon or self.model.horizon
        choices = self.choices_for(panel, h)
        members, plain = member_points(self.model, panel, h, self.params.fallback)
        points = candidate_points(members, self.params.fallback)
        out = []
        for i, f in enumerate(plain):
            c = choices[f.series_id]
            if f.method != MODEL:  # too little history for the model: its documented fallback
                out.append(f)
                continue
            p50 = np.maximum(points[c.forecaster][i], 0.0)
            p95 = p50 + c.margin if c.margin is not None else np.maximum(f.p95, p50)
            out.append(Forecast(f.series_id, p50, p95, f.method, c.forecaster, c.backtest_mae, c.regime_shift))
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "fleet": self.fleet,
            "backtest_days": self.backtest_days,
            "params": asdict(self.params),
            "choices": {s: asdict(c) for s, c in self.choices.items()},
        }

    @classmethod
    def from_description(cls, model: ForecastModel, doc: dict[str, Any] | None) -> SelectedForecaster:
        """A stored selection; a model stored without one (older versions) serves as the model alone,
        with new series backtested at forecast time."""
        if not doc:
            return cls(model, MODEL, {}, SelectParams(), 0)
        known = set(SelectParams.__dataclass_fields__)
        params = SelectParams(**{k: v for k, v in doc.get("params", {}).items() if k in known})
        choices = {s: Choice(**c) for s, c in doc.get("choices", {}).items()}
        return cls(model, str(doc.get("fleet", MODEL)), choices, params, int(doc.get("backtest_days", 0)))


def _blocks(panel: Panel, horizon: int, wanted: int) -> int:
    """How many backtest horizons fit: each origin needs more than a day of history behind it."""
    day = steps_per_day(panel.step_s)
    longest = max((len(v) for v in panel.values), default=0)
    return max(0, min(wanted, (longest - day - 2) // max(horizon, 1)))


def fit_selected(
    history: Panel,
    *,
    horizon: int = 288,
    params: TrainParams | None = None,
    select: SelectParams | None = None,
) -> SelectedForecaster:
    """Backtest, choose and calibrate on `history`, then train the final model on all of it.

    The simulator's entry point too: `fit_selected(panel).forecast(panel_now, horizon)` gives
    p50/p95 per series (`Forecast.forecaster` names the choice)."""
    select = select or SelectParams()
    day = steps_per_day(history.step_s)
    blocks = _blocks(history, horizon, select.backtest_days)
    model = None
    bt = None
    if blocks:
        before, _ = history.split(blocks * horizon)
        try:
            bt_model = train(before, horizon=horizon, params=params)
        except ValueError:  # too little history before the backtests: no backtests
            blocks = 0
        else:
            bt = backtest(bt_model, history, horizon, blocks, select.fallback)
    model = train(history, horizon=horizon, params=params)
    if bt is None:
        return SelectedForecaster(model, MODEL, {s: Choice(MODEL, None, None) for s in history.ids}, select, 0)
    fleet = fleet_choice(bt)
    return SelectedForecaster(model, fleet, choose(bt, fleet, select, day), select, blocks)
