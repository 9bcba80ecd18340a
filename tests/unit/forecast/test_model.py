"""The global model: trains on real trace samples, round-trips through bytes, falls back on short series."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from broker.forecast.evaluate import evaluate
from broker.forecast.features import FEATURES
from broker.forecast.history import HistoryError, Panel, parse_long_frame, regularize
from broker.forecast.model import ForecastModel, TrainParams, _conformal_shift, model_inputs, train

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "usage"
FAST = TrainParams(rounds=12, max_depth=5)


@pytest.fixture(scope="module")
def azure() -> Panel:
    frame, numeric = parse_long_frame(pd.read_csv(FIXTURES / "azure_4x4d.csv.gz"))
    return regularize(frame, numeric_time=numeric)


def test_forecast_round_trips_through_bytes_and_bands_hold(azure: Panel) -> None:
    model = train(azure, horizon=48, params=FAST)
    again = ForecastModel.from_bytes(model.to_bytes(), model.describe())
    a, b = model.forecast(azure), again.forecast(azure)
    for fa, fb in zip(a, b, strict=True):
        assert fa.method == "xgboost" and len(fa.p50) == 48
        np.testing.assert_allclose(fa.p50, fb.p50)
        assert (fa.p95 >= fa.p50).all() and (fa.p50 >= 0).all()


def test_short_series_fall_back_to_a_baseline(azure: Panel) -> None:
    model = train(azure, horizon=12, params=FAST)
    short = Panel(["tiny"], [0], [np.array([1.0, 2.0, 3.0])])
    (f,) = model.forecast(short)
    assert f.method == "fallback:last_value" and (f.p50 == 3.0).all() and (f.p95 >= 3.0).all()


def test_too_little_history_to_train_is_a_clear_error() -> None:
    with pytest.raises(HistoryError, match="too little history"):
        train(Panel(["a"], [0], [np.ones(50)]), horizon=12, params=FAST)


def test_evaluation_scores_every_forecaster_on_the_held_out_points(azure: Panel) -> None:
    ev = evaluate(azure, horizon=48, params=FAST)
    assert set(ev.scores) >= {"xgboost", "seasonal_naive", "last_value", "weekly_median"}
    assert all(s.points == 4 * 48 for s in ev.scores.values())
    # the held-out slots of a daily-periodic real series: the model must do better than
    # predicting its own history mean, which a broken feature/target alignment would not
    _, held = azure.split(48)
    mean_mae = np.mean(np.concatenate([np.abs(h - np.nanmean(y)) for h, y in zip(held, azure.values, strict=True)]))
    assert ev.scores["xgboost"].mae < mean_mae


def test_recursive_roll_out_and_direct_agree_on_shapes_and_bands(azure: Panel) -> None:
    params = dataclasses.replace(FAST, strategy="recursive")
    model = train(azure, horizon=24, params=params)
    again = ForecastModel.from_bytes(model.to_bytes(), model.describe())
    assert again.params.strategy == "recursive"
    for f in again.forecast(azure):
        assert f.method == "xgboost" and len(f.p50) == 24
        assert (f.p95 >= f.p50).all() and np.isfinite(f.p50).all()


def test_a_model_of_an_older_feature_layout_is_not_used(azure: Panel) -> None:
    model = train(azure, horizon=12, params=FAST)
    description = {**model.describe(), "features": model.features[:-1]}
    stale = ForecastModel.from_bytes(model.to_bytes(), description)
    assert {f.method for f in stale.forecast(azure)} == {"fallback:stale_model"}


def test_auto_base_is_one_of_the_candidates_and_survives_storage(azure: Panel) -> None:
    model = train(azure, horizon=48, params=dataclasses.replace(FAST, base="auto"))
    assert model.base in {"", "median_14d"} and model.meta["base_candidates"] == ["", "median_14d"]
    fixed = train(azure, horizon=48, params=dataclasses.replace(FAST, base="median_14d"))
    again = ForecastModel.from_bytes(fixed.to_bytes(), fixed.describe())
    assert again.base == "median_14d"
    np.testing.assert_allclose(fixed.forecast(azure)[0].p50, again.forecast(azure)[0].p50)


def test_base_inputs_are_log_ratios_to_the_base_level() -> None:
    x = np.ones((2, len(FEATURES)), np.float32)
    col = FEATURES.index("median_14d")
    x[:, col] = [1.0, 3.0]
    x[:, FEATURES.index("last")] = [1.0, 7.0]
    xin, base = model_inputs(x, "median_14d")
    np.testing.assert_allclose(base, np.log1p([1.0, 3.0]), rtol=1e-6)
    np.testing.assert_allclose(xin[:, FEATURES.index("last")], np.log1p([1.0, 7.0]) - base, rtol=1e-6, atol=1e-6)
    assert (xin[:, FEATURES.index("hour_of_day")] == 1.0).all()  # unitless features unchanged
    same, zero = model_inputs(x, "")
    assert same is x and (zero == 0).all()


def test_conformal_shift_reaches_the_coverage_it_is_asked_for() -> None:
    rng = np.random.default_rng(7)
    actual = rng.normal(size=2000)
    pred = np.zeros(2000)
    s = _conformal_shift(pred, actual, 0.95)
    assert np.mean(actual <= pred + s) == pytest.approx(0.95, abs=0.002)


@pytest.mark.parametrize("bad", [{"strategy": "sideways"}, {"base": "median_99d"}])
def test_bad_training_options_are_clear_errors(azure: Panel, bad: dict[str, str]) -> None:
    with pytest.raises(HistoryError):
        train(azure, horizon=12, params=dataclasses.replace(FAST, **bad))  # type: ignore[arg-type]
