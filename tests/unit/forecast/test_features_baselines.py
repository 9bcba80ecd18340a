"""Features never look past their origin; baselines do what their names say."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from broker.forecast import baselines
from broker.forecast.features import FEATURES, forecast_matrix, gather, series_features
from broker.forecast.sizing import size

DAY = 288


def test_features_at_an_origin_ignore_everything_after_it() -> None:
    rng = np.random.default_rng(1)
    y = rng.gamma(2.0, 10.0, size=9 * DAY)
    origin, horizon = 6 * DAY + 17, DAY
    changed = y.copy()
    changed[origin + 1 :] = rng.gamma(2.0, 10.0, size=len(y) - origin - 1)
    h = np.arange(1, horizon + 1, dtype=np.int64)
    o = np.full(horizon, origin, dtype=np.int64)
    a, b = series_features(y, 0, 300), series_features(changed, 0, 300)
    # the per-series scale (its mean) is one number per series; value features are linear
    # in y / scale, so multiplying back by the scale compares what was known at the origin
    unitless = {"horizon_frac", "log_scale", "hour_of_day", "day_of_week"}
    cols = [i for i, f in enumerate(FEATURES) if f not in unitless]
    fa, fb = gather(a, o, h, horizon) * a.scale, gather(b, o, h, horizon) * b.scale
    assert fa.shape == (horizon, len(FEATURES))
    np.testing.assert_allclose(fa[:, cols], fb[:, cols], rtol=1e-4, equal_nan=True)
    # and the comparison can see a leak: one step further ahead reads the changed values
    leaky = gather(a, o + 1, h, horizon) * a.scale, gather(b, o + 1, h, horizon) * b.scale
    assert not np.allclose(leaky[0][:, cols], leaky[1][:, cols], rtol=1e-4, equal_nan=True)


def last_origin_rows(y: np.ndarray, start: int, horizon: int) -> np.ndarray:
    """The training path (rolling features at every index, gathered) at the last origin."""
    sf = series_features(y, start, 300)
    h = np.arange(1, horizon + 1, dtype=np.int64)
    return gather(sf, np.full(horizon, len(y) - 1, dtype=np.int64), h, horizon)


def test_forecast_rows_extend_past_the_end() -> None:
    y = np.arange(3 * DAY, dtype=float) + 1
    rows, scales = forecast_matrix([y], [0], 300, DAY)
    lag1 = rows[:, FEATURES.index("lag_1d")] * scales[0]
    np.testing.assert_allclose(lag1, y[-DAY:], rtol=1e-5)  # tomorrow's slot = today's value


def test_lags_past_the_origin_are_missing_beyond_a_day() -> None:
    y = np.random.default_rng(5).gamma(2.0, 5.0, size=9 * DAY)
    rows, _ = forecast_matrix([y], [0], 300, 3 * DAY)
    h = np.arange(1, 3 * DAY + 1)
    for d in (1, 2, 3):
        col = rows[:, FEATURES.index(f"lag_{d}d")]
        assert np.isnan(col[h > d * DAY]).all() and np.isfinite(col[h <= d * DAY]).all()
    np.testing.assert_allclose(rows, last_origin_rows(y, 0, 3 * DAY), rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("seasonal_naive", lambda y: y[-DAY:]),
        ("last_value", lambda y: np.full(DAY, y[-1])),
        ("weekly_median", lambda y: np.median(y.reshape(-1, DAY)[-7:], axis=0)),
        ("median_last_week", lambda y: np.full(DAY, np.median(y[-7 * DAY :]))),
        ("median_last_hour", lambda y: np.full(DAY, np.median(y[-12:]))),
        ("median_last_2_weeks", lambda y: np.full(DAY, np.median(y[-14 * DAY :]))),
    ],
)
def test_baselines(name: str, expected: Callable[[np.ndarray], np.ndarray]) -> None:
    y = np.random.default_rng(2).gamma(2.0, 5.0, size=15 * DAY)
    got = baselines.BASELINES[name](y, DAY, DAY)
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(expected(y), dtype=float))


def test_seasonal_naive_beyond_a_day_repeats_the_last_day_and_skips_gaps() -> None:
    y = np.tile(np.arange(DAY, dtype=float), 3)
    y[-DAY + 5] = np.nan
    f = baselines.seasonal_naive(y, 2 * DAY, DAY)
    assert f[DAY + 7] == 7.0 and f[5] == y[-1]  # missing slot -> last value


def test_baseline_band_covers_its_point() -> None:
    y = np.random.default_rng(3).gamma(2.0, 5.0, size=4 * DAY)
    p50, p95 = baselines.with_p95(baselines.seasonal_naive, y, DAY, DAY)
    assert (p95 >= p50).all() and (p95 > p50).any()


@pytest.mark.parametrize(
    ("metric", "declared", "replicas", "peak", "headroom", "only_down", "expected"),
    [
        ("cpu", 2.0, 4, 4.0, 20, False, 1.2),  # 4 cores total * 1.2 / 4 replicas
        ("cpu", 0.5, 2, 4.0, 0, False, 2.0),  # upsizing when the forecast needs more
        ("cpu", 0.5, 2, 4.0, 0, True, 0.5),  # unless only_downsize
        ("cpu", 1.0, 1, 0.0, 20, False, 0.05),  # floor: never a zero request
        ("memory_gib", 8.0, 2, 3.0, 50, False, 2.25),
    ],
)
def test_sizing(
    metric: str, declared: float, replicas: int, peak: float, headroom: float, only_down: bool, expected: float
) -> None:
    p95 = np.array([peak / 2, peak, peak / 3])
    r = size(
        metric,
        declared=declared,
        replicas=replicas,
        p50=p95 / 2,
        p95=p95,
        headroom_pct=headroom,
        method="xgboost",
        only_downsize=only_down,
    )
    assert r.forecast == pytest.approx(expected)
    assert r.p95_peak == pytest.approx(peak)


def test_batch_inference_rows_equal_the_training_features() -> None:
    """One vectorised pass over series of different lengths, gaps and ends equals the training
    path series by series (lengths below and above the 14-day window)."""
    rng = np.random.default_rng(4)
    lengths = [int(1.5 * DAY), 3 * DAY, 9 * DAY, 16 * DAY + 7]
    ys = [rng.gamma(2.0, 5.0, size=n) for n in lengths]
    ys[1][40:60] = np.nan
    ys[2][-DAY - 30 : -DAY] = np.nan
    starts = [1_700_000_000 + 300 * k for k in range(len(ys))]
    fast, scales = forecast_matrix(ys, starts, 300, DAY)
    for k, y in enumerate(ys):
        slow = last_origin_rows(y, starts[k], DAY)
        np.testing.assert_allclose(fast[k * DAY : (k + 1) * DAY], slow, rtol=1e-4, atol=1e-5, equal_nan=True)
        assert scales[k] == pytest.approx(np.nanmean(y))
