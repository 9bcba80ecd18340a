"""Simple forecasts the model must beat, and the fallback for series the model cannot serve.

Each returns point forecasts for the `horizon` steps after the end of `y` (regular grid,
NaN = missing). A p95 for a baseline is its point forecast plus the 95th percentile of
its own errors when backtested on the last day of the history (empirical interval).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def last_finite(y: FloatArray) -> float:
    ok = np.flatnonzero(np.isfinite(y))
    return float(y[ok[-1]]) if len(ok) else 0.0


def _same_slot(y: FloatArray, horizon: int, day: int, days_back: int) -> FloatArray:
    """(horizon, days_back) matrix: the value at the same slot 1..days_back days before each target,
    counted from the nearest observed day (so horizons beyond a day reuse the last known day)."""
    n = len(y)
    h = np.arange(1, horizon + 1)
    first = np.ceil(h / day).astype(np.int64)  # the most recent day that is already observed
    idx = (n - 1 + h)[:, None] - (first[:, None] + np.arange(days_back)[None, :]) * day
    out = np.full(idx.shape, np.nan)
    ok = (idx >= 0) & (idx < n)
    out[ok] = y[idx[ok]]
    return out


def last_value(y: FloatArray, horizon: int, day: int) -> FloatArray:
    return np.full(horizon, last_finite(y))


def seasonal_naive(y: FloatArray, horizon: int, day: int) -> FloatArray:
    """Same slot yesterday (the last observed day for longer horizons); last value where missing."""
    f = _same_slot(y, horizon, day, 1)[:, 0]
    return np.where(np.isfinite(f), f, last_finite(y))


def weekly_median(y: FloatArray, horizon: int, day: int) -> FloatArray:
    """Median of the same slot over the last 7 observed days."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = np.nanmedian(_same_slot(y, horizon, day, 7), axis=1)
    return np.where(np.isfinite(f), f, last_finite(y))


def weekly_median_many(values: list[FloatArray], horizon: int, day: int) -> FloatArray:
    """`weekly_median` of many series at once, (series, horizon): one nanmedian call instead of one
    per series (the per-call overhead of nanmedian dominated the selected forecaster's inference)."""
    if not values:
        return np.empty((0, horizon))
    slots = np.stack([_same_slot(y, horizon, day, 7) for y in values])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = np.nanmedian(slots, axis=2)
    last = np.array([last_finite(y) for y in values])[:, None]
    return np.where(np.isfinite(f), f, last)


def blend(y: FloatArray, horizon: int, day: int) -> FloatArray:
    """Half yesterday, half weekly median of the slot (the reference heuristic on Azure)."""
    return 0.5 * seasonal_naive(y, horizon, day) + 0.5 * weekly_median(y, horizon, day)


def _flat_median(y: FloatArray, horizon: int, window: int) -> FloatArray:
    """Flat: the median of the last `window` points (the last value when they are all missing)."""
    recent = y[-max(1, window) :]
    return np.full(horizon, float(np.nanmedian(recent)) if np.isfinite(recent).any() else last_finite(y))


def median_last_6h(y: FloatArray, horizon: int, day: int) -> FloatArray:
    """Flat: the median of the last 6 hours (strong on smooth series, e.g. Azure)."""
    return _flat_median(y, horizon, day // 4)


def median_last_week(y: FloatArray, horizon: int, day: int) -> FloatArray:
    """Flat: the median of the last 7 days (strong on spiky series, e.g. Bitbrains)."""
    return _flat_median(y, horizon, 7 * day)


def median_last_hour(y: FloatArray, horizon: int, day: int) -> FloatArray:
    """Flat: the median of the last hour (the best flat level on Azure's smooth series)."""
    return _flat_median(y, horizon, day // 24)


def median_last_2_weeks(y: FloatArray, horizon: int, day: int) -> FloatArray:
    """Flat: the median of the last 14 days (the best flat level on Bitbrains' spiky series)."""
    return _flat_median(y, horizon, 14 * day)


BASELINES: dict[str, Callable[[FloatArray, int, int], FloatArray]] = {
    "seasonal_naive": seasonal_naive,
    "last_value": last_value,
    "weekly_median": weekly_median,
    "blend_yday_weekly": blend,
    "median_last_6h": median_last_6h,
    "median_last_week": median_last_week,
    "median_last_hour": median_last_hour,
    "median_last_2_weeks": median_last_2_weeks,
}


def backtest_mae(fn: Callable[[FloatArray, int, int], FloatArray], y: FloatArray, day: int) -> float | None:
    """Mean absolute error of a baseline forecasting the last day of `y` from the day before (None
    without two days of history)."""
    if len(y) <= 2 * day:
        return None
    err = np.abs(y[-day:] - fn(y[:-day], day, day))
    return float(np.nanmean(err)) if np.isfinite(err).any() else None


def with_p95(
    fn: Callable[[FloatArray, int, int], FloatArray], y: FloatArray, horizon: int, day: int
) -> tuple[FloatArray, FloatArray]:
    """(p50, p95) of a baseline; the band comes from backtesting it on the last day of `y`."""
    point = fn(y, horizon, day)
    margin = 0.0
    if len(y) > 2 * day:
        back = fn(y[:-day], day, day)
        err = y[-day:] - back
        err = err[np.isfinite(err)]
        if len(err):
            margin = max(0.0, float(np.quantile(err, 0.95)))
    return point, point + margin
