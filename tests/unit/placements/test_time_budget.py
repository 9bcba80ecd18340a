"""The time a placement gets (broker/placements/time_budget.py): the default curve, the caps by
how the request runs, and what the answer says when a cap cut the time."""

from __future__ import annotations

import pytest

from broker.placements.time_budget import TimeCaps, default_time_limit_s, time_budget
from broker.settings import Settings

POINTS = Settings().default_time_budget


@pytest.mark.parametrize(
    ("workloads", "seconds"),
    [(1, 10.0), (12, 10.0), (100, 10.0), (300, 20.0), (3000, 30.0), (20000, 120.0)],
)
def test_the_default_budget_passes_through_its_points(workloads: int, seconds: float) -> None:
    assert default_time_limit_s(workloads, POINTS) == pytest.approx(seconds)


def test_the_default_budget_grows_with_the_request_between_and_beyond_its_points() -> None:
    sizes = [1, 50, 100, 150, 300, 1000, 3000, 5000, 10000, 20000, 40000]
    budgets = [default_time_limit_s(n, POINTS) for n in sizes]
    assert budgets == sorted(budgets)
    assert 30.0 < default_time_limit_s(5000, POINTS) < 60.0  # the largest synchronous request by default
    # log-log interpolation: halfway in log(workloads) is the geometric mean of the seconds
    assert default_time_limit_s(7746, POINTS) == pytest.approx((30.0 * 120.0) ** 0.5, rel=1e-3)
    # beyond the last point the last segment's power goes on
    assert default_time_limit_s(40000, POINTS) == pytest.approx(120.0 * 2**0.7307, rel=1e-3)
    assert default_time_limit_s(5, [(1000, 7.0)]) == default_time_limit_s(10**6, [(1000, 7.0)]) == 7.0


def test_the_default_settings_give_a_3000_workload_request_30_s_sync_and_20000_120_s_async() -> None:
    caps = TimeCaps.of(Settings())
    three = time_budget(None, 3000, caps, synchronous=True)
    assert (three.seconds, three.capped, three.warning(caps.async_s)) == (30.0, False, None)
    twenty = time_budget(None, 20000, caps, synchronous=False)
    assert (twenty.seconds, twenty.capped) == (120.0, False)


def test_synchronous_and_asynchronous_requests_have_their_own_caps() -> None:
    caps = TimeCaps.of(Settings(sync_time_limit_s=60, async_time_limit_s=300))
    # the old single cap (BROKER_SOLVE_TIME_LIMIT_S = 10) gave 10 s to both
    assert time_budget(45.0, 12, caps, synchronous=True).seconds == 45.0
    assert time_budget(90.0, 12, caps, synchronous=True).seconds == 60.0
    assert time_budget(90.0, 12, caps, synchronous=False).seconds == 90.0
    assert time_budget(None, 100_000, caps, synchronous=False).seconds == 300.0
    assert time_budget(5.0, 20000, caps, synchronous=False).seconds == 5.0  # a request's own limit wins


def test_a_capped_budget_says_so_and_points_a_synchronous_request_to_async() -> None:
    caps = TimeCaps.of(Settings(sync_time_limit_s=20))
    sync = time_budget(None, 3000, caps, synchronous=True)
    assert sync.capped and sync.seconds == 20.0
    msg = sync.warning(caps.async_s)
    assert msg is not None
    assert "default time budget for this request's size is 30 s" in msg
    assert "BROKER_SYNC_TIME_LIMIT_S" in msg and '"async": true for up to 300 s' in msg
    job = time_budget(500.0, 3000, caps, synchronous=False)
    assert job.seconds == 300.0
    msg = job.warning(caps.async_s)
    assert msg is not None and "time_limit_s 500 s was asked" in msg and "BROKER_ASYNC_TIME_LIMIT_S" in msg


def test_the_old_single_cap_still_caps_both_when_set() -> None:
    caps = TimeCaps.of(Settings(solve_time_limit_s=10))
    assert (caps.sync_s, caps.async_s) == (10.0, 10.0)
    assert time_budget(None, 3000, caps, synchronous=False).seconds == 10.0
