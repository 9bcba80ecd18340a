"""Features never look past their origin; baselines do what their names say."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from broker.forecast import baselines
from broker.forecast.features import (
    FEATURES,
    REGIME_CAP_DAYS,
    forecast_matrix,
    gather,
    regime_days,
    series_features,
)
from broker.forecast.sizing import size

DAY = 288


def test_features_at_an_origin_ignore_everything_after_it() -> None:
    rng = np.random.default_rng(1)
    y = rng.gamma(2.0, 10.0, size=9 * DAY)
    origin, horizon = 6 * DAY + 17, DAY
    # the future reshuffled: the per-series scale (the history's mean, a normaliser, not a
    # forecast input) stays the same, everything read after the origin changes
    changed = y.copy()
    changed[origin + 1 :] = rng.permutation(y[origin + 1 :])
    h = np.arange(1, horizon + 1, dtype=np.int64)
    o = np.full(horizon, origin, dtype=np.int64)
    a, b = series_features(y, 0, 300), series_features(changed, 0, 300)
    assert a.scale == pytest.approx(b.scale)
    fa, fb = gather(a, o, h, horizon), gather(b, o, h, horizon)
    assert fa.shape == (horizon, len(FEATURES))
    np.testing.assert_allclose(fa, fb, rtol=1e-4, atol=1e-6, equal_nan=True)
    # and the comparison can see a leak: one step further ahead reads the changed values
    assert not np.allclose(gather(a, o + 1, h, horizon), gather(b, o + 1, h, horizon), rtol=1e-4, equal_nan=True)
    # every kind of feature is checked: level, slot, level-ratio and regime columns all differ there
    for name in ("mean_6h", "lag_1d", "lvl_6h_vs_14d", "regime_days", "mean_prev_24h"):
        col = FEATURES.index(name)
        assert not np.allclose(
            gather(a, o + 3 * DAY // 2, h, horizon)[:, col],
            gather(b, o + 3 * DAY // 2, h, horizon)[:, col],
            equal_nan=True,
        ), name


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


def test_regime_days_counts_how_long_a_busy_spell_has_lasted() -> None:
    # idle for 8 days, then busy for a day and a half: + 1.5 days at the end
    y = np.concatenate((np.full(8 * DAY, 2.0), np.full(DAY + DAY // 2, 90.0)))
    r = regime_days(y[None, :] / y.mean(), DAY)[0]  # scaled, as both paths see it
    assert r[-1] == pytest.approx(1.5, abs=1 / 24 + 1e-9)  # the 1 h mean crosses within an hour
    assert r[8 * DAY - 1] == -REGIME_CAP_DAYS  # long idle: capped, negative
    # a busy spell longer than the cap stays at the cap
    long = np.concatenate((np.full(8 * DAY, 2.0), np.full(4 * DAY, 900.0)))
    assert regime_days(long[None, :] / long.mean(), DAY)[0, -1] == REGIME_CAP_DAYS
    # all zeros (an idle VM) is idle, not a flip-flop of rounding noise
    assert (regime_days(np.zeros((1, 3 * DAY)), DAY)[0, -DAY:] < 0).all()
    # the inference path (last column of a right-aligned matrix) agrees with the training path
    rows, _ = forecast_matrix([y], [0], 300, 4)
    assert rows[0, FEATURES.index("regime_days")] == pytest.approx(r[-1], abs=1e-6)
    assert rows[0, FEATURES.index("lvl_1h_vs_14d")] > 1.0  # busy far above the 14-day median


def test_weekly_median_of_many_series_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(4)
    values = [rng.gamma(2.0, 3.0, size=n) for n in (9 * DAY, 3 * DAY + 5, 40)]
    values[0][100:400] = np.nan  # a long gap
    many = baselines.weekly_median_many(values, DAY, DAY)
    for y, row in zip(values, many, strict=True):
        np.testing.assert_allclose(row, baselines.weekly_median(y, DAY, DAY))
