"""The global model: trains on real trace samples, round-trips through bytes, falls back on short series."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from broker.forecast.evaluate import evaluate
from broker.forecast.features import FEATURES, gather, series_features
from broker.forecast.history import HistoryError, Panel, parse_long_frame, regularize
from broker.forecast.model import (
    ForecastModel,
    TrainParams,
    _conformal_shift,
    _level_weight,
    model_inputs,
    train,
    training_matrix,
)

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


@pytest.mark.parametrize(
    "bad", [{"strategy": "sideways"}, {"base": "median_99d"}, {"combine": "1.5"}, {"combine": "x"}]
)
def test_bad_training_options_are_clear_errors(azure: Panel, bad: dict[str, str]) -> None:
    with pytest.raises(HistoryError):
        train(azure, horizon=12, params=dataclasses.replace(FAST, **bad))  # type: ignore[arg-type]


def test_validation_over_several_days_forecasts_each_from_its_own_origin() -> None:
    day, days = 24, 3  # hourly steps: a small synthetic panel
    rng = np.random.default_rng(3)
    y = 5 + 3 * np.sin(np.arange(12 * day) * 2 * np.pi / day) + rng.gamma(1.0, 1.0, 12 * day)
    panel = Panel(["a"], [0], [y], step_s=3600)
    data = training_matrix(panel, day, dataclasses.replace(FAST, select_days=days), hold_out=True)
    assert len(data.y_val) == days * day
    # fitting rows end before the first validation day: none of its targets was seen
    assert len(data.y) <= len(y) - days * day - (day + 1)
    # each validation day is read from its own origin: exactly what a forecast from there sees
    last = gather(series_features(y[: 11 * day], 0, 3600), np.full(day, 11 * day - 1), np.arange(1, day + 1), day)
    np.testing.assert_allclose(data.x_val[-day:], last, rtol=1e-4, atol=1e-6, equal_nan=True, err_msg="last origin")


def test_level_features_are_opt_in_and_survive_storage(azure: Panel) -> None:
    plain = train(azure, horizon=24, params=FAST)
    assert "regime_days" not in plain.features and plain.booster.num_features() == len(plain.features)
    model = train(azure, horizon=24, params=dataclasses.replace(FAST, level_features=True))
    assert model.features == FEATURES and model.current
    again = ForecastModel.from_bytes(model.to_bytes(), model.describe())
    assert again.current
    for fa, fb in zip(model.forecast(azure), again.forecast(azure), strict=True):
        assert fa.method == fb.method == "xgboost"
        np.testing.assert_allclose(fa.p50, fb.p50)


def test_combination_mixes_the_p50_with_the_14_day_median_and_survives_storage(azure: Panel) -> None:
    plain = train(azure, horizon=48, params=FAST)
    half = train(azure, horizon=48, params=dataclasses.replace(FAST, combine="0.5"))
    assert half.level_weight == 0.5
    again = ForecastModel.from_bytes(half.to_bytes(), half.describe())
    for y, fp, fh, fa in zip(
        azure.values, plain.forecast(azure), half.forecast(azure), again.forecast(azure), strict=True
    ):
        # a fixed weight trains the same booster: only the p50 moves, halfway to the series' median
        level = np.nanmedian(y[-14 * 288 :])
        np.testing.assert_allclose(fh.p50, 0.5 * fp.p50 + 0.5 * level, rtol=1e-4)
        np.testing.assert_allclose(fa.p50, fh.p50)
        assert (fh.p95 >= fh.p50).all()
    auto = train(azure, horizon=48, params=dataclasses.replace(FAST, combine="auto"))
    assert auto.level_weight in {round(0.1 * k, 1) for k in range(11)}


def test_the_level_weight_is_the_one_with_the_lowest_validation_error() -> None:
    x = np.ones((4, len(FEATURES)), np.float32)
    x[:, FEATURES.index("median_14d")] = [1.0, 1.0, np.nan, 1.0]
    p50, w = np.array([3.0, 3.0, 3.0, 3.0]), np.ones(4)
    assert _level_weight(p50, x, np.array([1.0, 1.0, 3.0, 1.0]), w) == 1.0  # the level was right
    assert _level_weight(p50, x, p50, w) == 0.0  # the model was right
    assert _level_weight(p50, x, np.array([2.0, 2.0, 3.0, 2.0]), w) == 0.5
