"""The selected forecaster: chosen on the past only, regime shifts detected, conformal bands that cover."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from broker.forecast.history import Panel, parse_long_frame, regularize
from broker.forecast.model import TrainParams
from broker.forecast.rolling import rolling_origin
from broker.forecast.select import (
    CANDIDATES,
    MODEL,
    Backtest,
    SelectedForecaster,
    SelectParams,
    choose,
    conformal_margin,
    fit_selected,
    fleet_choice,
    regime_shift,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "usage"
FAST = TrainParams(rounds=10, max_depth=4, max_rows=20_000)
DAY = 288


@pytest.fixture(scope="module")
def azure() -> Panel:
    frame, numeric = parse_long_frame(pd.read_csv(FIXTURES / "azure_4x4d.csv.gz"))
    return regularize(frame, numeric_time=numeric)


def synthetic(n_series: int, days: int, seed: int, *, shift_at: int | None = None) -> Panel:
    """Daily cycles plus noise (exchangeable residuals); `shift_at`: the last series jumps 4x there."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * DAY)
    values = []
    for i in range(n_series):
        level = 1.0 + i
        y = level * (1.0 + 0.4 * np.sin(2 * np.pi * t / DAY + i)) + rng.normal(0, 0.15 * level, len(t))
        values.append(np.maximum(y, 0.0))
    if shift_at is not None:
        values[-1][shift_at:] *= 4.0
    return Panel([f"s{i}" for i in range(n_series)], [0] * n_series, values)


def test_perturbing_the_data_after_an_origin_changes_nothing_chosen_at_it(azure: Panel) -> None:
    """Rolling origin over 2 days: the earlier day's choice, bands and scores are the same when the
    last day (after its origin, and its held-out day) is replaced by noise."""
    horizon = 96
    changed = Panel(
        azure.ids,
        azure.starts,
        [np.concatenate((v[:-horizon], np.random.default_rng(3).uniform(0, 100, horizon))) for v in azure.values],
        azure.step_s,
    )
    a = rolling_origin(azure, days=2, horizon=horizon, params=FAST)
    b = rolling_origin(changed, days=2, horizon=horizon, params=FAST)
    assert a.days[0].back == 1 and a.days[0].fleet == b.days[0].fleet
    assert a.days[0].scores["selected"] == b.days[0].scores["selected"]
    # the perturbation is visible where it should be: on the last day
    assert a.days[1].scores["selected"].mae != b.days[1].scores["selected"].mae


def test_fit_selected_forecasts_the_chosen_candidate_with_its_band(azure: Panel) -> None:
    fitted = fit_selected(azure, horizon=96, params=FAST)
    assert fitted.backtest_days == 3 and fitted.fleet in CANDIDATES
    forecasts = fitted.forecast(azure, 96)
    for f in forecasts:
        c = fitted.choices[f.series_id]
        assert f.forecaster == c.forecaster and f.backtest_mae == c.backtest_mae and c.margin is not None
        np.testing.assert_allclose(f.p95 - f.p50, c.margin)
        assert len(f.p50) == 96 and (f.p50 >= 0).all()
    # stored and loaded: the same forecasts
    again = SelectedForecaster.from_description(fitted.model, fitted.describe())
    for fa, fb in zip(forecasts, again.forecast(azure, 96), strict=True):
        np.testing.assert_allclose(fa.p95, fb.p95)


def test_a_series_unknown_to_the_selection_is_backtested_at_forecast_time(azure: Panel) -> None:
    fitted = fit_selected(azure, horizon=96, params=FAST)
    renamed = dataclasses.replace(azure, ids=[f"new-{s}" for s in azure.ids])
    (f, *_) = fitted.forecast(renamed, 96)
    assert f.forecaster in (fitted.fleet, SelectParams().fallback) and f.backtest_mae is not None


def test_conformal_margin_covers_fresh_draws_at_its_level() -> None:
    rng = np.random.default_rng(0)
    coverage = []
    for _ in range(200):
        margin = conformal_margin(rng.standard_t(4, 600), 0.95)
        assert margin is not None
        coverage.append(np.mean(rng.standard_t(4, 2000) <= margin))
    assert 0.945 <= np.mean(coverage) <= 0.965
    assert conformal_margin(np.array([np.nan]), 0.95) is None
    assert conformal_margin(np.full(50, -3.0), 0.95) == 0.0  # never below the p50


def test_selected_band_covers_a_synthetic_day_on_every_seed() -> None:
    for seed in (0, 1):
        panel = synthetic(6, 8, seed)
        history, held = panel.split(DAY)
        fitted = fit_selected(history, horizon=DAY, params=dataclasses.replace(FAST, seed=seed))
        forecasts = fitted.forecast(history, DAY)
        covered = np.mean(np.concatenate([a <= f.p95 for a, f in zip(held, forecasts, strict=True)]))
        assert 0.90 <= covered <= 0.995, (seed, covered)


def test_regime_shift_needs_a_significant_and_material_move() -> None:
    rng = np.random.default_rng(1)
    earlier = rng.normal(0, 1, 600)
    params = SelectParams()
    assert regime_shift(rng.normal(6, 1, 72), earlier, params)
    assert not regime_shift(rng.normal(0.5, 1, 72), earlier, params)  # significant, not material
    assert not regime_shift(rng.normal(6, 1, 5), earlier, params)  # too few points to test


def test_a_shifted_series_falls_back_to_the_recent_level_rule() -> None:
    rng = np.random.default_rng(2)
    blocks, n = 3, DAY
    res = {name: rng.normal(0, 1, (blocks, 2, n)) for name in [*CANDIDATES, SelectParams().fallback]}
    res[MODEL][-1, 1, -72:] += 10.0  # series 1: the model's last 6 hours moved far off
    bt = Backtest(["steady", "shifted"], res)
    assert fleet_choice(bt) in CANDIDATES
    out = choose(bt, MODEL, SelectParams(), DAY)
    assert out["steady"].forecaster == MODEL and not out["steady"].regime_shift
    assert out["shifted"].regime_shift and out["shifted"].forecaster == SelectParams().fallback


def test_fit_selected_detects_a_level_shift_before_the_origin() -> None:
    panel = synthetic(4, 8, 5, shift_at=8 * DAY - 60)
    fitted = fit_selected(panel, horizon=DAY, params=FAST)
    assert fitted.choices["s3"].regime_shift and fitted.choices["s3"].forecaster == SelectParams().fallback
    assert not any(fitted.choices[s].regime_shift for s in ("s0", "s1", "s2"))
    (f,) = [f for f in fitted.forecast(panel, DAY) if f.series_id == "s3"]
    assert f.p50.mean() > 2.5 * np.mean(panel.values[3][-2 * DAY : -DAY])  # sized on the new level


def test_too_short_for_backtests_serves_the_model_alone() -> None:
    full = synthetic(3, 2, 0)
    panel = dataclasses.replace(full, values=[v[: DAY + 140] for v in full.values])  # a day + < one horizon
    fitted = fit_selected(panel, horizon=DAY // 2, params=FAST)
    assert fitted.backtest_days == 0 and fitted.fleet == MODEL
    assert all(c.margin is None for c in fitted.choices.values())
