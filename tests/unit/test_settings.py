"""Settings are validated when they are built (at the edge): the solver's time caps against the
timeouts that would cut them, and the default budget's curve."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from broker.settings import Settings


def test_defaults_are_valid_and_fit_their_timeouts() -> None:
    s = Settings()
    assert s.sync_time_limit_s < s.request_timeout_s
    assert 120.0 <= s.async_time_limit_s < s.job_timeout_s  # a 20,000-workload request at 120 s


def test_caps_and_the_budget_curve_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_SYNC_TIME_LIMIT_S", "45")
    monkeypatch.setenv("BROKER_ASYNC_TIME_LIMIT_S", "600")
    monkeypatch.setenv("BROKER_DEFAULT_TIME_BUDGET", "[[10, 5], [1000, 20]]")
    s = Settings()
    assert (s.sync_time_limit_s, s.async_time_limit_s) == (45.0, 600.0)
    assert s.default_time_budget == [(10, 5.0), (1000, 20.0)]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sync_time_limit_s": 120.0}, "below request_timeout_s"),
        ({"sync_time_limit_s": 30.0, "request_timeout_s": 20.0}, "below request_timeout_s"),
        ({"async_time_limit_s": 900.0}, "below job_timeout_s"),
        ({"async_time_limit_s": 0.0}, "greater than 0"),
        ({"sync_time_limit_s": -1.0}, "greater than 0"),
        ({"solve_time_limit_s": 0.0}, "greater than 0"),
        ({"default_time_budget": []}, "at least one"),
        ({"default_time_budget": [(100, 10.0), (100, 20.0)]}, "workloads must increase"),
        ({"default_time_budget": [(100, 20.0), (1000, 10.0)]}, "seconds must not decrease"),
        ({"default_time_budget": [(0, 10.0)]}, "workloads must be >= 1"),
        ({"default_time_budget": [(100, 0.0)]}, "seconds > 0"),
    ],
)
def test_invalid_time_settings_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(**fields)  # type: ignore[arg-type]
