"""The dashboard's forecast panel sets the day-ahead forecast of usage against the demand that came."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from broker.app import Broker
from broker.db.forecast_models import UsageSampleRow
from broker.finops.service import FinOps

END = datetime(2026, 11, 20, 12, tzinfo=UTC)  # the window ends at noon; samples up to it
DAYS = 16  # 14 days of features before the compared day, plus slack


def _daily_cycle(t: int) -> float:
    """Cores used: the same shape every day, 1.0 to 6.0 by the hour."""
    return 1.0 + (t // 3600) % 6


def _store(broker: Broker, tenant: str, series: str, scale: float) -> None:
    stop = int(END.timestamp())
    rows = [
        UsageSampleRow(tenant=tenant, series=series, metric="cpu", ts=t, value=scale * _daily_cycle(t))
        for t in range(stop - DAYS * 86_400, stop, 300)
    ]
    with broker.sessions.begin() as s:
        s.add_all(rows)


def test_the_last_day_is_forecast_from_the_days_before_and_matches_a_steady_cycle(broker: Broker) -> None:
    _store(broker, "acme", "web", 1.0)
    _store(broker, "acme", "db", 0.5)
    _store(broker, "globex", "web", 100.0)  # another tenant's usage stays out of acme's panel
    panel = FinOps(broker).dashboard(tenant="acme", start=END - timedelta(days=7), end=END).forecast

    assert panel["available"] is True and panel["reason"] == ""
    meta = panel["forecast"]
    assert meta["from"] == (END - timedelta(days=1)).isoformat() and meta["to"] == END.isoformat()
    assert meta["model_version"] is None  # no model trained: the baseline
    assert meta["method"] == "fallback:weekly_median"
    points = panel["series"]
    assert len(points) == 7 * 24  # hourly over a week
    compared = [p for p in points if p["p50"] is not None]
    assert [p["timestamp"] for p in compared] == [
        (END - timedelta(hours=24 - h)).isoformat() for h in range(24)
    ]  # exactly the last day, hour by hour
    for p in compared:
        # a cycle that repeats exactly is forecast exactly: the same slot of the last week
        assert p["p50"] == pytest.approx(p["actual"], rel=1e-6)
        assert p["p95"] >= p["p50"]
        assert p["actual"] == pytest.approx(1.5 * _daily_cycle(int(datetime.fromisoformat(p["timestamp"]).timestamp())))


def test_usage_only_inside_the_window_shows_actual_demand_without_a_forecast(broker: Broker) -> None:
    stop = int(END.timestamp())
    with broker.sessions.begin() as s:
        s.add_all(UsageSampleRow(tenant="acme", series="web", metric="cpu", ts=t, value=2.0)
                  for t in range(stop - 3 * 3600, stop, 300))  # fmt: skip
    panel = FinOps(broker).dashboard(tenant="acme", start=END - timedelta(days=2), end=END).forecast
    assert panel["available"] is True and "actual demand only" in panel["reason"]
    assert [p["actual"] for p in panel["series"]] == [2.0, 2.0, 2.0]
    assert all(p["p50"] is None for p in panel["series"]) and "forecast" not in panel
