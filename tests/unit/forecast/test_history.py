"""Validation and regular-grid rules for usage history (docs/forecast.md, "Bad input")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from broker.forecast.history import HistoryError, parse_long_frame, regularize


def frame(rows: list[tuple[object, object, object]], metric: list[str] | None = None) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["series_id", "timestamp", "value"], dtype=object)
    if metric is not None:
        df["metric"] = metric
    return df


@pytest.mark.parametrize(
    ("rows", "loc", "msg"),
    [
        ([("a", 0, "1.5"), ("a", 300, "abc")], ["line", 3, "value"], "not a finite number"),
        ([("a", 0, "1.5"), ("a", 300, "-2")], ["line", 3, "value"], "negative usage"),
        ([("a", "yesterday", "1")], ["line", 2, "timestamp"], "not Unix seconds or ISO 8601"),
        ([("a", 0, "inf")], ["line", 2, "value"], "not a finite number"),
        ([("", 0, "1")], ["line", 2, "series_id"], "empty series_id"),
    ],
)
def test_bad_rows_are_named(rows: list[tuple[object, object, object]], loc: list[object], msg: str) -> None:
    with pytest.raises(HistoryError) as info:
        parse_long_frame(frame(rows))
    assert {"loc": loc, "msg": msg} in info.value.errors


def test_missing_column_and_several_metrics() -> None:
    with pytest.raises(HistoryError, match="missing column"):
        parse_long_frame(pd.DataFrame({"series_id": ["a"], "value": [1]}))
    two = frame([("a", 0, 1), ("a", 0, 2)], metric=["cpu", "memory_gib"])
    with pytest.raises(HistoryError, match="several metrics"):
        parse_long_frame(two)
    kept, _ = parse_long_frame(two, metric="memory_gib")
    assert kept["value"].tolist() == [2.0]


def test_iso_and_unix_timestamps_agree() -> None:
    parsed, numeric = parse_long_frame(
        frame([("a", "2024-01-01T00:05:00Z", 1), ("a", 1704067500 + 300, 2), ("a", "2024-01-01T01:10:00+01:00", 3)])
    )
    assert not numeric
    assert parsed["ts"].tolist() == [1704067500, 1704067800, 1704067800]


def test_jitter_and_duplicates_are_binned_and_averaged() -> None:
    parsed, _ = parse_long_frame(frame([("a", 1000, 1), ("a", 1301, 3), ("a", 1299, 5), ("a", 1600, 7)]))
    panel = regularize(parsed)
    assert panel.starts == [1000]
    assert panel.values[0].tolist() == [1.0, 4.0, 7.0]
    assert any("averaged" in w for w in panel.warnings)


@pytest.mark.parametrize(("gap_steps", "filled"), [(2, True), (12, True), (13, False)])
def test_short_gaps_interpolated_long_gaps_missing(gap_steps: int, filled: bool) -> None:
    ts = [0, 300, 300 * (2 + gap_steps), 300 * (3 + gap_steps)]
    parsed, _ = parse_long_frame(frame([("a", t, v) for t, v in zip(ts, [0, 10, 20, 30], strict=True)]))
    y = regularize(parsed, max_gap_steps=12).values[0]
    assert len(y) == 4 + gap_steps
    assert bool(np.isfinite(y).all()) is filled
    if filled:
        assert np.allclose(np.diff(y[1 : 2 + gap_steps + 1]), 10 / (gap_steps + 1))
