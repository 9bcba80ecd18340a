"""Feature matrices for the direct multi-horizon model.

A row predicts the value at target index T from what is known at origin o = T - h
(1 <= h <= horizon). Features come in two kinds:

- origin features (known at o): last value, 1 h mean and median, rolling means of 6 h /
  24 h, 24 h spread and quantiles, 3-, 7- and 14-day medians (spiky series: the long
  level beats any single day), and how today's last hour compares with the same hour
  yesterday (a level shift that the daily pattern alone would miss);
- slot features (about T, from values at or before o): the same slot 1..7 days back,
  their median/mean/max/std, yesterday smoothed over the 5 slots up to it, time of day
  and day of week. A lag that would lie after the origin (h longer than d days) is
  missing, in training and at inference alike.

Everything is divided by a per-series scale (its mean), so one global model serves
series of any size; the scale itself is a feature. Missing values (long gaps, short
histories) stay NaN, which XGBoost routes natively.

Training computes origin features at every index of a series with rolling windows
(`series_features`); inference needs them at the last index only and computes them for
all series at once on one right-aligned matrix (`forecast_matrix`): no per-row Python.
A unit test checks the two paths agree.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
F32Array = npt.NDArray[np.float32]

LAG_DAYS = 7
LONG_DAYS = 14  # the longest origin window (median_14d)
ORIGIN_FEATURES = [
    "last",
    "mean_1h",
    "median_1h",
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
    "median_14d",
    "mean_prev_24h",
    "regime_days",
]
REGIME_CAP_DAYS = 3
BUSY_FACTOR = 1.5  # regime_days: "busy" = the 1 h mean above this multiple of the 7-day mean
SLOT_FEATURES = [
    *(f"lag_{d}d" for d in range(1, LAG_DAYS + 1)),
    "slot_median_7d",
    "slot_mean_7d",
    "slot_max_7d",
    "slot_std_7d",
    "yday_smooth",
    "hour_of_day",
    "day_of_week",
]
# level shifts (log ratios of a recent level to a long-run one): how far the series is from
# its usual level, so trees can learn mean reversion (a busy day falling back to idle)
# without composing two raw columns
LEVEL_RATIOS = [
    ("lvl_1h_vs_14d", "mean_1h", "median_14d"),
    ("lvl_6h_vs_14d", "mean_6h", "median_14d"),
    ("lvl_24h_vs_14d", "mean_24h", "median_14d"),
    ("lvl_1h_vs_slot", "mean_1h", "slot_median_7d"),
    ("lvl_24h_vs_slot", "mean_24h", "slot_median_7d"),
]
RATIO_FEATURES = [name for name, _, _ in LEVEL_RATIOS]
FEATURES = ["horizon_frac", "log_scale", *ORIGIN_FEATURES, *SLOT_FEATURES, *RATIO_FEATURES]
# opt-in (TrainParams.level_features): always computed, used only by models trained with them
LEVEL_FEATURES = ["mean_prev_24h", "regime_days", *RATIO_FEATURES]
SMOOTH = 5  # yday_smooth: trailing mean over this many slots


def _trailing_mean(z: FloatArray, window: int) -> FloatArray:
    """Row-wise trailing mean over `window` columns ignoring NaN (NaN when all are missing),
    like pandas' rolling mean with min_periods=1."""
    ok = np.isfinite(z)
    zero = np.zeros((len(z), 1))
    cs = np.concatenate((zero, np.cumsum(np.where(ok, z, 0.0), axis=1)), axis=1)
    cn = np.concatenate((zero, np.cumsum(ok, axis=1)), axis=1)
    hi = np.arange(1, z.shape[1] + 1)
    lo = np.maximum(hi - window, 0)
    count = cn[:, hi] - cn[:, lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (cs[:, hi] - cs[:, lo]) / count, np.nan)


def regime_days(z: FloatArray, day: int) -> FloatArray:
    """At every column of a scaled matrix (series, time): the signed time (days, capped at
    REGIME_CAP_DAYS) the 1 h mean has been busy (above BUSY_FACTOR x the trailing 7-day mean,
    +) or not (-), NaN where missing. Busy spells of idle-by-default VMs have a
    typical length; this tells the trees how far into one they are. Only values at or before
    each column are read; the last column is exact from REGIME_CAP_DAYS + 7 days of columns."""
    hour = max(1, day // 24)
    m1h, m7d = _trailing_mean(z, hour), _trailing_mean(z, 7 * day)
    # busy: clearly above the week's mean (the margin keeps flat or all-zero stretches, where
    # the two means tie up to rounding, on one side)
    busy = m1h > BUSY_FACTOR * m7d + 1e-6
    side = np.where(np.isnan(m1h) | np.isnan(m7d), 0, np.where(busy, 1, -1))
    n = side.shape[1]
    idx = np.broadcast_to(np.arange(n), side.shape)
    change = np.ones(side.shape, dtype=bool)
    change[:, 1:] = side[:, 1:] != side[:, :-1]
    start = np.maximum.accumulate(np.where(change, idx, 0), axis=1)
    run = np.minimum(idx - start + 1, REGIME_CAP_DAYS * day) / day
    return np.where(side != 0, side * run, np.nan)


def with_ratios(x: F32Array) -> F32Array:
    """Append RATIO_FEATURES to rows holding every other feature (one code path for training
    and inference, so the two agree by construction)."""
    cols = {f: i for i, f in enumerate(FEATURES)}
    ratios = [
        np.log1p(np.maximum(x[:, cols[a]], 0.0)) - np.log1p(np.maximum(x[:, cols[b]], 0.0)) for _, a, b in LEVEL_RATIOS
    ]
    return np.hstack([x, np.column_stack(ratios).astype(np.float32)])


def steps_per_day(step_s: int) -> int:
    return max(1, round(86400 / step_s))


def series_scale(y: FloatArray) -> float:
    """Per-series scale: mean level (or 1 for an all-zero series, so nothing divides by zero)."""
    m = float(np.nanmean(y)) if np.isfinite(y).any() else 0.0
    return m if m > 1e-9 else 1.0


# ---- training: every index of one series ------------------------------------------------


@dataclass(frozen=True)
class SeriesFeatures:
    """Per-series precomputed values: origin features at every index, and the scaled series."""

    scale: float
    y: FloatArray  # scaled values, length n
    origin: F32Array  # (n, len(ORIGIN_FEATURES))
    smooth: FloatArray  # trailing SMOOTH-slot mean at every index
    start_s: int
    step_s: int


def _rolling(s: pd.Series, window: int, how: str) -> FloatArray:
    r = s.rolling(window, min_periods=1)
    q = {"q90": 0.9}.get(how)
    out: pd.Series = r.quantile(q) if q is not None else getattr(r, how)()
    return np.asarray(out.to_numpy(dtype=np.float64))


def series_features(y_raw: FloatArray, start_s: int, step_s: int) -> SeriesFeatures:
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
            _rolling(s, hour, "median"),
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
            _rolling(s, LONG_DAYS * day, "median"),
            np.concatenate((np.full(min(n, day), np.nan), _rolling(s, day, "mean")[:-day]))
            if n > day
            else np.full(n, np.nan),
            regime_days(y[None, :], day)[0],
        ]
    ).astype(np.float32)
    return SeriesFeatures(scale, y, origin, _rolling(s, SMOOTH, "mean"), start_s, step_s)


def _slot_rows(lags: FloatArray, yday_smooth: FloatArray, target_s: IntArray) -> F32Array:
    """Slot features from the lag matrix (rows, LAG_DAYS), already masked past the origin."""
    with warnings.catch_warnings():  # all-NaN slots (too little history) are expected: NaN out
        warnings.simplefilter("ignore", RuntimeWarning)
        slot_median = _nanmedian_rows(lags)
        slot_mean = np.nanmean(lags, axis=1)
        slot_max = np.nanmax(lags, axis=1)
        slot_std = np.nanstd(lags, axis=1)
    hour_of_day = (target_s % 86400) / 3600.0
    day_of_week = ((target_s // 86400) + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    return np.column_stack(
        [lags, slot_median, slot_mean, slot_max, slot_std, yday_smooth, hour_of_day, day_of_week]
    ).astype(np.float32)


def _nanmedian_rows(a: FloatArray) -> FloatArray:
    """Row-wise NaN-ignoring median (NaN for an all-NaN row) via one sort; much faster than
    np.nanmedian on many short rows."""
    srt = np.sort(a, axis=1)  # NaN sorts last
    k = np.isfinite(a).sum(axis=1)
    lo = np.clip((k - 1) // 2, 0, a.shape[1] - 1)
    hi = np.clip(k // 2, 0, a.shape[1] - 1)
    rows = np.arange(len(a))
    med = 0.5 * (srt[rows, lo] + srt[rows, hi])
    return np.where(k > 0, med, np.nan)


def gather(sf: SeriesFeatures, origins: IntArray, horizons: IntArray, horizon: int) -> F32Array:
    """Rows for (origin index, steps ahead) pairs of one series."""
    day = steps_per_day(sf.step_s)
    n = len(sf.y)
    targets = origins + horizons
    lags = np.full((len(origins), LAG_DAYS), np.nan)
    for d in range(1, LAG_DAYS + 1):
        idx = targets - d * day
        ok = (idx >= 0) & (idx < n) & (idx <= origins)
        lags[ok, d - 1] = sf.y[idx[ok]]
    idx = targets - day
    ok = (idx >= 0) & (idx < n) & (idx <= origins)
    yday = np.full(len(origins), np.nan)
    yday[ok] = sf.smooth[idx[ok]]
    head = np.column_stack([horizons / float(horizon), np.full(len(origins), np.log1p(sf.scale))]).astype(np.float32)
    slot = _slot_rows(lags, yday, sf.start_s + targets * sf.step_s)
    return with_ratios(np.hstack([head, sf.origin[origins], slot]))


def training_rows(
    sf: SeriesFeatures,
    horizon: int,
    *,
    day: int,
    per_point: int,
    rng: np.random.Generator,
    one_step: bool = False,
) -> tuple[F32Array, FloatArray]:
    """Every observed target with at least a day of history before its origin, `per_point`
    random horizons each (h = 1 only for a one-step model): (features, scaled targets)."""
    n = len(sf.y)
    first = day + 1
    if n <= first + 1:
        return np.empty((0, len(FEATURES)), np.float32), np.empty(0)
    targets = np.repeat(np.arange(first, n, dtype=np.int64), 1 if one_step else per_point)
    if one_step:
        h = np.ones(len(targets), dtype=np.int64)
    else:
        h = rng.integers(1, horizon + 1, size=len(targets), dtype=np.int64)
        h = np.minimum(h, targets - day)  # an origin needs a day of history behind it
    origins = targets - h
    y = sf.y[targets]
    keep = np.isfinite(y) & np.isfinite(sf.y[origins])
    return gather(sf, origins[keep], h[keep], horizon), y[keep]


# ---- inference: the last index of every series at once ----------------------------------


def right_aligned(values: Sequence[FloatArray], width: int) -> FloatArray:
    """(series, width) matrix of each series' last `width` values, NaN-padded on the left."""
    out = np.full((len(values), width), np.nan)
    for i, v in enumerate(values):
        k = min(len(v), width)
        if k:
            out[i, width - k :] = v[len(v) - k :]
    return out


def _nanquantile_rows(srt: FloatArray, k: npt.NDArray[np.int64], q: float) -> FloatArray:
    """Linear-interpolated quantile of rows already sorted with NaN last, k finite values each
    (numpy's and pandas' default method)."""
    pos = q * np.maximum(k - 1, 0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(k - 1, 0))
    rows = np.arange(len(srt))
    a, b = srt[rows, lo], srt[rows, hi]
    out = a + (b - a) * (pos - lo)
    return np.where(k > 0, out, np.nan)


def origin_at_end(z: FloatArray, day: int) -> FloatArray:
    """ORIGIN_FEATURES at the last column of a right-aligned, scaled matrix (series, >= 14 days),
    equal to series_features' rolling values at the last index."""
    hour = max(1, day // 24)
    width = z.shape[1]

    def tail(k: int, back: int = 0) -> FloatArray:
        return z[:, max(0, width - back - k) : width - back]

    def sorted_tail(k: int) -> tuple[FloatArray, npt.NDArray[np.int64]]:
        t = tail(k)
        return np.sort(t, axis=1), np.isfinite(t).sum(axis=1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        d1, d1k = sorted_tail(day)
        w7, w7k = sorted_tail(7 * day)
        mean_1h = np.nanmean(tail(hour), axis=1)
        prev = np.nanmean(tail(hour, day), axis=1) if width > day else np.full(len(z), np.nan)
        cols = [
            z[:, -1],
            mean_1h,
            _nanmedian_rows(tail(hour)),
            np.nanmean(tail(6 * hour), axis=1),
            np.nanmean(d1, axis=1),
            np.where(d1k > 1, np.nanstd(d1, axis=1, ddof=1), np.nan),
            _nanquantile_rows(d1, d1k, 0.5),
            _nanquantile_rows(d1, d1k, 0.9),
            np.nanmax(d1, axis=1),
            mean_1h - prev,
            _nanmedian_rows(tail(3 * day)),
            _nanquantile_rows(w7, w7k, 0.5),
            _nanquantile_rows(w7, w7k, 0.9),
            _nanmedian_rows(tail(LONG_DAYS * day)),
            np.nanmean(tail(day, day), axis=1) if width > day else np.full(len(z), np.nan),
            regime_days(z, day)[:, -1],
        ]
    return np.column_stack(cols)


def matrix_rows(
    z: FloatArray, scales: FloatArray, end_s: IntArray, step_s: int, steps: int, model_horizon: int
) -> F32Array:
    """Feature rows (series-major: series 0 steps 1..steps, then series 1, ...) after the last
    column of a right-aligned scaled matrix z (series, width) whose last column is at end_s.
    `horizon_frac` is h / model_horizon, as in training. Exact for width >= LONG_DAYS days."""
    day = steps_per_day(step_s)
    n_series, width = z.shape
    horizon = steps
    h = np.arange(1, steps + 1, dtype=np.int64)
    origin = origin_at_end(z, day)
    # lag d of step h reads column width - 1 + h - d * day, known only when h <= d * day
    lags = np.full((n_series, horizon, LAG_DAYS), np.nan)
    for d in range(1, LAG_DAYS + 1):
        col = width - 1 + h - d * day
        ok = (h <= d * day) & (col >= 0)
        lags[:, ok, d - 1] = z[:, col[ok]]
    col = width - 1 + h - day
    ok = (h <= day) & (col >= 0)
    yday = np.full((n_series, horizon), np.nan)
    if ok.any():
        # trailing SMOOTH-slot mean ending at each needed column (min_periods=1, NaN ignored)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            windows = np.stack([z[:, np.maximum(col[ok] - j, 0)] for j in range(SMOOTH)], axis=2)
            valid = (col[ok][None, :, None] - np.arange(SMOOTH)[None, None, :]) >= 0
            yday[:, ok] = np.nanmean(np.where(valid, windows, np.nan), axis=2)
    target_s = (end_s[:, None] + h[None, :] * step_s).reshape(-1)
    slot = _slot_rows(lags.reshape(-1, LAG_DAYS), yday.reshape(-1), target_s)
    head = np.column_stack([np.tile(h / float(model_horizon), n_series), np.repeat(np.log1p(scales), horizon)]).astype(
        np.float32
    )
    return with_ratios(np.hstack([head, np.repeat(origin.astype(np.float32), horizon, axis=0), slot]))


def forecast_matrix(
    values: Sequence[FloatArray], starts: Sequence[int], step_s: int, horizon: int, model_horizon: int | None = None
) -> tuple[F32Array, FloatArray]:
    """Feature rows for the next `horizon` steps of every series, in one vectorised pass:
    (rows (series * horizon, features), per-series scales)."""
    day = steps_per_day(step_s)
    scales = np.array([series_scale(v) for v in values], dtype=np.float64)
    z = right_aligned(values, LONG_DAYS * day) / scales[:, None]
    end_s = np.array([s + (len(v) - 1) * step_s for s, v in zip(starts, values, strict=True)], dtype=np.int64)
    return matrix_rows(z, scales, end_s, step_s, horizon, model_horizon or horizon), scales
