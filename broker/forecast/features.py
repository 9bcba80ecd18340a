"""Feature matrices for the direct multi-horizon model.

A row predicts the value at target index T from what is known at origin o = T - h
(1 <= h <= horizon). Features come in two kinds, both computed once per series with
vectorised rolling operations and then gathered per row:

- origin features (known at o): last value, rolling means of 1 h / 6 h / 24 h, 24 h
  spread and quantiles, 3- and 7-day medians (spiky series: the week's level beats any
  single day), and how today's last hour compares with the same hour
  yesterday (a level shift that the daily pattern alone would miss);
- slot features (about T, from values at least one day older): the same slot 1..7 days
  back, their median/mean/max/std, yesterday smoothed over the 5 slots up to it, time of day and day of week.

Everything is divided by a per-series scale (its mean), so one global model serves
series of any size; the scale itself is a feature. Missing values (long gaps, short
histories) stay NaN, which XGBoost routes natively.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ORIGIN_FEATURES = [
    "last",
    "mean_1h",
    "mean_6h",
    "mean_24h",
    "std_24h",
    "median_24h",
    "q90_24h",
    "max_24h",
    "shift_1h_vs_yday",
    "median_3d",
    "median_7d",
    "q90_7d",
]
SLOT_FEATURES = [
    *(f"lag_{d}d" for d in range(1, 8)),
    "slot_median_7d",
    "slot_mean_7d",
    "slot_max_7d",
    "slot_std_7d",
    "yday_smooth",
    "hour_of_day",
    "day_of_week",
]
FEATURES = ["horizon_frac", "log_scale", *ORIGIN_FEATURES, *SLOT_FEATURES]


def steps_per_day(step_s: int) -> int:
    return max(1, round(86400 / step_s))


def series_scale(y: FloatArray) -> float:
    """Per-series scale: mean level (or 1 for an all-zero series, so nothing divides by zero)."""
    m = float(np.nanmean(y)) if np.isfinite(y).any() else 0.0
    return m if m > 1e-9 else 1.0


@dataclass(frozen=True)
class SeriesFeatures:
    """Per-series precomputed features; slot features extend `horizon` steps past the end."""

    scale: float
    y: FloatArray  # scaled values, length n
    origin: npt.NDArray[np.float32]  # (n, len(ORIGIN_FEATURES))
    slot: npt.NDArray[np.float32]  # (n + horizon, len(SLOT_FEATURES))


def _rolling(s: pd.Series, window: int, how: str) -> FloatArray:
    r = s.rolling(window, min_periods=1)
    q = {"q90": 0.9}.get(how)
    out: pd.Series = r.quantile(q) if q is not None else getattr(r, how)()
    return np.asarray(out.to_numpy(dtype=np.float64))


def series_features(y_raw: FloatArray, start_s: int, step_s: int, horizon: int) -> SeriesFeatures:
    day = steps_per_day(step_s)
    scale = series_scale(y_raw)
    y = y_raw / scale
    n = len(y)
    s = pd.Series(y)
    hour = max(1, day // 24)
    mean_1h = _rolling(s, hour, "mean")
    prev_day_1h = np.concatenate((np.full(day, np.nan), mean_1h[:-day])) if n > day else np.full(n, np.nan)
    origin = np.column_stack(
        [
            y,
            mean_1h,
            _rolling(s, 6 * hour, "mean"),
            _rolling(s, day, "mean"),
            _rolling(s, day, "std"),
            _rolling(s, day, "median"),
            _rolling(s, day, "q90"),
            _rolling(s, day, "max"),
            mean_1h - prev_day_1h,
            _rolling(s, 3 * day, "median"),
            _rolling(s, 7 * day, "median"),
            _rolling(s, 7 * day, "q90"),
        ]
    ).astype(np.float32)

    slot = _slot_block(y, start_s, step_s, horizon)
    return SeriesFeatures(scale, y, origin, slot)


def _slot_block(
    y: FloatArray, start_s: int, step_s: int, horizon: int, last: int | None = None
) -> npt.NDArray[np.float32]:
    """Slot features for every index of y and `horizon` steps past its end (y already scaled);
    only the final `last` rows when given (batch inference needs just the horizon)."""
    day = steps_per_day(step_s)
    ext = np.concatenate((y, np.full(horizon, np.nan)))
    m = len(ext)
    lags = np.full((m, 7), np.nan)
    for d in range(1, 8):
        k = d * day
        if k < m:
            lags[k:, d - 1] = ext[: m - k]
    first = 0 if last is None else m - last
    lags = lags[first:]
    with warnings.catch_warnings():  # all-NaN slots (too little history) are expected: NaN out
        warnings.simplefilter("ignore", RuntimeWarning)
        slot_median = np.nanmedian(lags, axis=1)
        slot_mean = np.nanmean(lags, axis=1)
        slot_max = np.nanmax(lags, axis=1)
        slot_std = np.nanstd(lags, axis=1)
    smooth = _rolling(pd.Series(ext), 5, "mean")  # trailing, so a row never sees past its origin
    yday_smooth = np.full(m, np.nan)
    if day < m:
        yday_smooth[day:] = smooth[: m - day]
    yday_smooth = yday_smooth[first:]
    t = start_s + np.arange(first, m, dtype=np.int64) * step_s
    hour_of_day = (t % 86400) / 3600.0
    day_of_week = ((t // 86400) + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    return np.column_stack(
        [lags, slot_median, slot_mean, slot_max, slot_std, yday_smooth, hour_of_day, day_of_week]
    ).astype(np.float32)


def _origin_at_end(y: FloatArray, day: int) -> npt.NDArray[np.float32]:
    """ORIGIN_FEATURES at the last index only, equal to series_features' rolling values there."""
    hour = max(1, day // 24)

    def tail(k: int, back: int = 0) -> FloatArray:
        end = len(y) - back
        return y[max(0, end - k) : end]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        d1 = tail(day)
        prev = np.nanmean(tail(hour, day)) if len(y) > day else np.nan
        row = [
            y[-1],
            np.nanmean(tail(hour)),
            np.nanmean(tail(6 * hour)),
            np.nanmean(d1),
            np.nanstd(d1, ddof=1) if np.isfinite(d1).sum() > 1 else np.nan,
            np.nanmedian(d1),
            np.nanquantile(d1, 0.9),
            np.nanmax(d1),
            np.nanmean(tail(hour)) - prev,
            np.nanmedian(tail(3 * day)),
            np.nanmedian(tail(7 * day)),
            np.nanquantile(tail(7 * day), 0.9),
        ]
    return np.asarray(row, dtype=np.float32)


def fast_forecast_rows(
    y_raw: FloatArray, start_s: int, step_s: int, horizon: int
) -> tuple[npt.NDArray[np.float32], float]:
    """forecast_rows(series_features(...)) without rolling over the whole history: (rows, scale).

    Batch inference computes the origin features once, at the end, and slot features only
    for the last week plus the horizon."""
    day = steps_per_day(step_s)
    scale = series_scale(y_raw)
    y = y_raw / scale
    keep = min(len(y), 7 * day + 8)
    tail_start = start_s + (len(y) - keep) * step_s
    slot = _slot_block(y[len(y) - keep :], tail_start, step_s, horizon, last=horizon)
    origin = np.repeat(_origin_at_end(y, day)[None, :], horizon, axis=0)
    head = np.column_stack([np.arange(1, horizon + 1) / float(horizon), np.full(horizon, np.log1p(scale))]).astype(
        np.float32
    )
    return np.hstack([head, origin, slot]), scale


def gather(sf: SeriesFeatures, origins: IntArray, horizons: IntArray, horizon: int) -> npt.NDArray[np.float32]:
    """Rows for (origin index, steps ahead) pairs of one series."""
    rows = len(origins)
    head = np.column_stack([horizons / float(horizon), np.full(rows, np.log1p(sf.scale))]).astype(np.float32)
    return np.hstack([head, sf.origin[origins], sf.slot[origins + horizons]])


def training_rows(
    sf: SeriesFeatures, horizon: int, *, day: int, per_point: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.float32], FloatArray]:
    """Every observed target with at least a day of history before its origin, `per_point`
    random horizons each: (features, scaled targets)."""
    n = len(sf.y)
    first = day + 1
    if n <= first + 1:
        return np.empty((0, len(FEATURES)), np.float32), np.empty(0)
    targets = np.repeat(np.arange(first, n, dtype=np.int64), per_point)
    h = rng.integers(1, horizon + 1, size=len(targets), dtype=np.int64)
    h = np.minimum(h, targets - day)  # an origin needs a day of history behind it
    origins = targets - h
    y = sf.y[targets]
    keep = np.isfinite(y) & np.isfinite(sf.y[origins])
    return gather(sf, origins[keep], h[keep], horizon), y[keep]


def forecast_rows(sf: SeriesFeatures, horizon: int) -> npt.NDArray[np.float32]:
    """Rows for the next `horizon` steps after the last observed point."""
    o = len(sf.y) - 1
    h = np.arange(1, horizon + 1, dtype=np.int64)
    return gather(sf, np.full(horizon, o, dtype=np.int64), h, horizon)
