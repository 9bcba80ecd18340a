"""Usage history: validate long-format samples and put each series on a regular time grid.

Real monitoring data is messy (Bitbrains: +-1 s jitter, gaps of an hour; exports that
repeat a sample). The rules, documented in docs/forecast.md:

- a value that is not a number, not finite, or negative is an error (with the rows);
- a timestamp is Unix seconds or ISO 8601; anything else is an error;
- samples are binned to the grid `start + k * step`; several samples in one bin
  (duplicates, jitter) are averaged and counted in `warnings`;
- a gap of at most `max_gap_steps` bins is filled by linear interpolation; a longer
  gap stays missing (NaN): the features skip it and it is never a training target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

FloatArray = npt.NDArray[np.float64]
MAX_ERRORS = 20


class HistoryError(ValueError):
    """Usage history that cannot be used; `errors` point at rows/fields ({"loc": [...], "msg": ...})."""

    def __init__(self, detail: str, errors: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = list(errors)


@dataclass(frozen=True)
class Panel:
    """Many series on regular grids of one step: series i has values[i][k] at starts[i] + k * step_s."""

    ids: list[str]
    starts: list[int]
    values: list[FloatArray]
    step_s: int = 300
    numeric_time: bool = True  # timestamps came as Unix seconds (else ISO 8601); output follows the input
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def n_points(self) -> int:
        return int(sum(len(v) for v in self.values))

    def split(self, horizon: int) -> tuple[Panel, list[FloatArray]]:
        """Hold out the last `horizon` points of every series: (history panel, held-out values)."""
        hist = [v[:-horizon] if len(v) > horizon else v[:0] for v in self.values]
        held = [v[-horizon:] if len(v) > horizon else v for v in self.values]
        return Panel(self.ids, self.starts, hist, self.step_s, self.numeric_time, list(self.warnings)), held


def _row_errors(mask: npt.NDArray[np.bool_], column: str, msg: str) -> list[dict[str, Any]]:
    rows = np.flatnonzero(mask)[:MAX_ERRORS]
    # +2: the header is line 1 and rows count from 0, so this is the line number in the file
    return [{"loc": ["line", int(r) + 2, column], "msg": msg} for r in rows]


def parse_timestamps(raw: pd.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_], bool]:
    """Unix seconds or ISO 8601 (mixed is fine) -> (int seconds, bad mask, all were numeric)."""
    as_num = pd.to_numeric(raw, errors="coerce")
    numeric = as_num.notna().to_numpy()
    secs = np.zeros(len(raw), dtype=np.int64)
    secs[numeric] = np.round(as_num[numeric].to_numpy(dtype=np.float64)).astype(np.int64)
    bad = np.zeros(len(raw), dtype=bool)
    if not numeric.all():
        text = raw[~numeric].astype(str)
        parsed = pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce")
        ok = parsed.notna().to_numpy()
        idx = np.flatnonzero(~numeric)
        secs[idx[ok]] = parsed[ok].to_numpy(dtype="datetime64[s]").astype(np.int64)
        bad[idx[~ok]] = True
    return secs, bad, bool(numeric.all())


def parse_long_frame(df: pd.DataFrame, *, metric: str | None = None) -> tuple[pd.DataFrame, bool]:
    """Validate a long frame (series_id, timestamp, value[, metric]); keep one metric.

    Returns (frame with columns series_id, ts, value, metric; timestamps were all numeric).
    """
    missing = [c for c in ("series_id", "timestamp", "value") if c not in df.columns]
    if missing:
        raise HistoryError(
            f"missing column(s) {missing}; expected series_id,timestamp,value[,metric]",
            [{"loc": ["header"], "msg": f"missing column {c!r}"} for c in missing],
        )
    if df.empty:
        raise HistoryError("the history has no rows", [{"loc": ["body"], "msg": "no rows"}])
    metrics = (
        df["metric"].fillna("cpu").astype(str).str.strip()
        if "metric" in df.columns
        else pd.Series("cpu", index=df.index)
    )
    errors: list[dict[str, Any]] = []
    sid = df["series_id"]
    errors += _row_errors(
        sid.isna().to_numpy() | (sid.astype(str).str.strip() == "").to_numpy(), "series_id", "empty series_id"
    )
    values = pd.to_numeric(df["value"], errors="coerce").to_numpy(dtype=np.float64)
    errors += _row_errors(~np.isfinite(values), "value", "not a finite number")
    errors += _row_errors(np.isfinite(values) & (values < 0), "value", "negative usage")
    secs, bad_ts, numeric_time = parse_timestamps(df["timestamp"])
    errors += _row_errors(bad_ts, "timestamp", "not Unix seconds or ISO 8601")
    if errors:
        raise HistoryError(f"{len(errors)} invalid value(s) in the usage history", errors[:MAX_ERRORS])
    out = pd.DataFrame({"series_id": sid.astype(str).str.strip(), "ts": secs, "value": values, "metric": metrics})
    if metric is not None:
        out = out[out["metric"] == metric]
        if out.empty:
            raise HistoryError(f"no samples of metric {metric!r}", [{"loc": ["metric"], "msg": "no samples"}])
    elif out["metric"].nunique() > 1:
        names = sorted(out["metric"].unique())
        raise HistoryError(
            f"the history has several metrics {names}; choose one",
            [{"loc": ["metric"], "msg": f"choose one of {names}"}],
        )
    return out.reset_index(drop=True), numeric_time


def _fill_short_gaps(y: FloatArray, max_gap: int) -> FloatArray:
    nan = np.isnan(y)
    if not nan.any() or nan.all():
        return y
    idx = np.arange(len(y))
    filled = y.copy()
    filled[nan] = np.interp(idx[nan], idx[~nan], y[~nan])
    # runs of NaN longer than max_gap (or at the ends, which np.interp only extends) stay missing
    edges = np.diff(np.concatenate(([0], nan.astype(np.int8), [0])))
    for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
        if b - a > max_gap or a == 0 or b == len(y):
            filled[a:b] = np.nan
    return filled


def regularize(frame: pd.DataFrame, *, step_s: int = 300, max_gap_steps: int = 12, numeric_time: bool = True) -> Panel:
    """Bin each series of a validated frame to a regular grid (see the module docstring)."""
    ids: list[str] = []
    starts: list[int] = []
    values: list[FloatArray] = []
    merged = 0
    for sid, g in frame.groupby("series_id", sort=True):
        ts = g["ts"].to_numpy(dtype=np.int64)
        t0 = int(ts.min())
        bins = np.round((ts - t0) / step_s).astype(np.int64)
        n = int(bins.max()) + 1
        sums = np.bincount(bins, weights=g["value"].to_numpy(dtype=np.float64), minlength=n)
        counts = np.bincount(bins, minlength=n)
        merged += int((counts > 1).sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        ids.append(str(sid))
        starts.append(t0)
        values.append(_fill_short_gaps(y, max_gap_steps))
    warnings = []
    if merged:
        warnings.append(f"{merged} grid slot(s) had several samples (duplicates or jitter); averaged")
    gaps = sum(int(np.isnan(v).sum()) for v in values)
    if gaps:
        warnings.append(f"{gaps} slot(s) in gaps longer than {max_gap_steps} steps left missing")
    return Panel(ids, starts, values, step_s, numeric_time, warnings)
