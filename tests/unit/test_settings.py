"""Settings are validated when they are built (at the edge): the solver's time caps against the
timeouts that would cut them, the default budget's curve, and values that would fail later, deep
in a request (as a 500), refused with a clear error."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app
from broker.core.allocatable import NodeOverhead
from broker.settings import MAX_STALE_AFTER_DAYS, Settings


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
        ({"sync_time_limit_s": 120.0}, "below BROKER_REQUEST_TIMEOUT_S"),
        ({"sync_time_limit_s": 30.0, "request_timeout_s": 20.0}, "below BROKER_REQUEST_TIMEOUT_S"),
        ({"async_time_limit_s": 900.0}, "below BROKER_JOB_TIMEOUT_S"),
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


@pytest.mark.parametrize("days", [10**12, float("inf"), 0, -1])
def test_price_stale_after_days_out_of_range_is_refused_naming_it(days: float) -> None:
    with pytest.raises(ValidationError) as exc:
        Settings(price_stale_after_days=days)
    assert exc.value.errors()[0]["loc"] == ("price_stale_after_days",)


def test_the_largest_accepted_staleness_still_has_a_date() -> None:
    from datetime import UTC, datetime

    from broker.catalog.prices import stale_sources

    s = Settings(price_stale_after_days=MAX_STALE_AFTER_DAYS)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    assert stale_sources({"aws": "2026-01-01"}, max_age_days=s.price_stale_after_days, now=now) == {}


def test_the_cli_says_which_setting_is_wrong_and_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_PRICE_STALE_AFTER_DAYS", str(10**12))
    result = CliRunner().invoke(app, ["pricing", "status"])
    assert result.exit_code == EXIT_INVALID
    assert "BROKER_PRICE_STALE_AFTER_DAYS" in result.output and "Traceback" not in result.output


def test_node_overhead_comes_from_settings_and_refuses_negatives() -> None:
    assert Settings(node_daemonset_vcpus=0.2, node_daemonset_memory_gib=0.5).node_overhead() == NodeOverhead(0.2, 0.5)
    assert Settings().node_overhead() == NodeOverhead()
    with pytest.raises(ValidationError):
        Settings(node_daemonset_memory_gib=-1)


def test_path_lists_read_plain_pathsep_lists_and_json(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("BROKER_SERVER_PATH_ROOTS", f"/srv/fleet{os.pathsep}/etc/broker/kube{os.pathsep}")
    monkeypatch.setenv("BROKER_GITOPS_FILE_ROOTS", '["/srv/git"]')
    monkeypatch.setenv("BROKER_OUTBOUND_ALLOWED_NETWORKS", "10.0.0.0/8, 192.168.0.0/16")
    s = Settings()
    assert s.server_path_roots == ["/srv/fleet", "/etc/broker/kube"]
    assert s.gitops_file_roots == ["/srv/git"]
    assert s.outbound_allowed_networks == ["10.0.0.0/8", "192.168.0.0/16"]


@pytest.mark.parametrize(
    ("variable", "value", "form"),
    [
        ("BROKER_SERVER_PATH_ROOTS", "[/srv/fleet", "folders separated by"),
        ("BROKER_GITOPS_FILE_ROOTS", "[1, 2]", "folders separated by"),
        ("BROKER_OUTBOUND_ALLOWED_NETWORKS", "10.0.0.0/8,not-a-net", "CIDRs separated by commas"),
        ("BROKER_DEFAULT_TIME_BUDGET", "100:10", "[workloads, seconds] points"),
        ("BROKER_DEFAULT_TIME_BUDGET", "[1, 2]", "[workloads, seconds] points"),
        ("BROKER_FAIR_SHARE_WEIGHTS", "team-a=2", "tenant -> weight"),
        ("BROKER_SYNC_TIME_LIMIT_S", "soon", "valid number"),
        ("BROKER_AUTH", "yes", "'off' or 'required'"),
    ],
)
@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["clusters", "list"], ["pricing", "status"]])
def test_a_malformed_setting_is_one_line_naming_it_and_its_form_exit_2(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, form: str, command: list[str]
) -> None:
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("COLUMNS", "80")  # one line, however long: not wrapped at the terminal's width
    result = CliRunner().invoke(app, command)
    assert result.exit_code == EXIT_INVALID, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"invalid setting {variable}:") and form in lines[0]
