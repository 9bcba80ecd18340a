"""The one stale-price warning a placement answer carries."""

from __future__ import annotations

from datetime import UTC, datetime

from broker.catalog.prices import price_snapshot, stale_warning

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _snapshot(dates: dict[str, str], days: float = 30) -> dict[str, object]:
    # price_snapshot reads the clock: ages here are relative to NOW, far in the past
    pools = {pid: (0.1, "aws", d) for pid, d in dates.items()}
    return price_snapshot("v1", pools, stale_after_days=days)


def test_one_line_names_the_count_the_oldest_age_and_the_fix() -> None:
    snap = _snapshot(
        {
            "aws:eu-west-1/m5.large/ondemand": "2026-07-05T00:00:00+00:00",
            "aws:eu-west-1/m5.xlarge/ondemand": "2026-06-04T00:00:00+00:00",
            "aws:eu-west-1/c5.large/ondemand": "2999-01-01T00:00:00+00:00",
        }
    )
    msg = stale_warning(snap, now=NOW)
    assert msg is not None
    assert "2 of 3 pools" in msg and "older than 30 days" in msg
    assert "oldest 180 days (aws:eu-west-1/m5.xlarge/ondemand, 2026-06-04)" in msg
    assert "broker pricing refresh" in msg


def test_no_warning_when_every_price_is_fresh() -> None:
    assert stale_warning(_snapshot({"aws:eu-west-1/m5.large/ondemand": "2999-01-01T00:00:00+00:00"}), now=NOW) is None
