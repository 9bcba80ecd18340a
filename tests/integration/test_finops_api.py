"""Savings ledger and FOCUS export over the API and the CLI, on real SQLite with real solves."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from typer.testing import CliRunner

from broker.app import Broker
from broker.cli.main import app as cli
from broker.db.placement_models import PlacementRow
from broker.finops.focus import COLUMN_NAMES
from broker.placements.documents import placement_document
from broker.settings import Settings

NOW = datetime.now(UTC).replace(microsecond=0)

REQUEST: dict[str, Any] = {
    "name": "svc",
    "workloads": [
        {"name": "api", "replicas": 4, "cpu": 2, "memory_gib": 4, "capacity_types": ["ondemand", "spot"],
         "providers": ["aws", "gcp"], "labels": {"team": "payments"}},
        {"name": "db", "replicas": 1, "cpu": 4, "memory_gib": 16, "storage_gib": 100, "providers": ["azure"]},
    ],
}  # fmt: skip


def _store(broker: Broker, doc: dict[str, Any], *, tenant: str, days_ago: float) -> dict[str, Any]:
    placement, stored = broker.place(doc, tenant=tenant)
    assert stored
    out = placement_document(placement)
    with broker.sessions.begin() as s:
        s.execute(
            update(PlacementRow).where(PlacementRow.id == out["id"]).values(created_at=NOW - timedelta(days=days_ago))
        )
    return out


@pytest.fixture(scope="module")
def fin_broker(module_db_url: str) -> Broker:
    return Broker.open(Settings(database_url=module_db_url))


@pytest.fixture(scope="module")
def client(fin_broker: Broker, ledger: dict[str, Any]) -> Iterator[TestClient]:
    """One app over one seeded ledger for the module: these tests only read."""
    from api.app import create_app

    with TestClient(create_app(broker=fin_broker)) as c:
        yield c


@pytest.fixture(scope="module")
def ledger(fin_broker: Broker) -> dict[str, dict[str, Any]]:
    """svc placed 10 days ago, re-placed 4 days ago (smaller); other tenant's 'batch' 2 days ago."""
    broker = fin_broker
    first = _store(broker, REQUEST, tenant="default", days_ago=10)
    smaller = {**REQUEST, "workloads": [{**REQUEST["workloads"][0], "replicas": 2}, REQUEST["workloads"][1]]}
    second = _store(broker, smaller, tenant="default", days_ago=4)
    batch = {"name": "batch", "workloads": [{"name": "crunch", "replicas": 3, "cpu": 8, "memory_gib": 16,
                                             "capacity_types": ["spot"], "labels": {"team": "data"}}]}  # fmt: skip
    other = _store(broker, batch, tenant="globex", days_ago=2)
    return {"first": first, "second": second, "other": other}


def _window(days: float) -> dict[str, str]:
    return {"from": (NOW - timedelta(days=days)).isoformat(), "to": NOW.isoformat()}


def test_savings_totals_accrue_each_placement_while_it_is_current(
    client: TestClient, ledger: dict[str, dict[str, Any]]
) -> None:
    r = client.get("/v1/savings", params={"group_by": "provider", **_window(7)})
    assert r.status_code == 200, r.text
    doc = r.json()
    first, second, other = ledger["first"], ledger["second"], ledger["other"]
    # in the last 7 days: first ran 3 days until replaced, second 4 days, other 2 days
    expected = first["cost_per_hour"] * 72 + second["cost_per_hour"] * 96 + other["cost_per_hour"] * 48
    assert doc["totals"]["cost"] == pytest.approx(expected, rel=1e-4)
    base = lambda d: d["baseline"]["cost_per_hour"]  # noqa: E731
    expected_base = base(first) * 72 + base(second) * 96 + base(other) * 48
    assert doc["totals"]["baseline_cost"] == pytest.approx(expected_base, rel=1e-4)
    # the headline baseline is the packer over every allowed pool; the greedy one accrues beside it, named
    assert {d["baseline"]["policy"] for d in (first, second, other)} == {"kubernetes-packer"}
    greedy = lambda d: d["baselines"][-1]["cost_per_hour"]  # noqa: E731
    assert {d["baselines"][-1]["policy"] for d in (first, second, other)} == {"greedy-cheapest-fit"}
    expected_greedy = greedy(first) * 72 + greedy(second) * 96 + greedy(other) * 48
    assert doc["totals"]["greedy_baseline_cost"] == pytest.approx(expected_greedy, rel=1e-4)
    assert doc["totals"]["placements_without_baseline"] == 0
    assert doc["baselines"][0]["policy"] == "kubernetes-packer"
    # the run-rate counts only what is current: second and other, not the replaced first
    assert doc["totals"]["cost_per_hour"] == pytest.approx(second["cost_per_hour"] + other["cost_per_hour"], rel=1e-4)
    saved_h = base(second) + base(other) - second["cost_per_hour"] - other["cost_per_hour"]
    assert doc["totals"]["savings_per_month"] == pytest.approx(saved_h * 730, abs=0.05)
    assert doc["totals"]["placements"] == 3
    providers = {g["key"] for g in doc["groups"]}
    assert providers <= {"aws", "gcp", "azure", "(egress)"} and "azure" in providers
    assert sum(g["cost"] for g in doc["groups"]) == pytest.approx(doc["totals"]["cost"], abs=1e-2)


@pytest.mark.parametrize(
    ("group_by", "keys"),
    [("tenant", {"default", "globex"}), ("team", {"payments", "data", "(unlabelled)"}), ("name", {"svc", "batch"})],
)
def test_savings_grouped(client: TestClient, ledger: dict[str, Any], group_by: str, keys: set[str]) -> None:
    doc = client.get("/v1/savings", params={"group_by": group_by, **_window(30)}).json()
    assert {g["key"] for g in doc["groups"]} == keys
    assert sum(g["cost_per_hour"] for g in doc["groups"]) == pytest.approx(doc["totals"]["cost_per_hour"], abs=1e-5)


def test_savings_filters_by_tenant_and_window(client: TestClient, ledger: dict[str, Any]) -> None:
    only = client.get("/v1/savings", params={"group_by": "tenant", "tenant": "globex", **_window(30)}).json()
    assert [g["key"] for g in only["groups"]] == ["globex"]
    # a window that ends before anything was placed
    empty = client.get(
        "/v1/savings",
        params={"from": (NOW - timedelta(days=30)).isoformat(), "to": (NOW - timedelta(days=20)).isoformat()},
    ).json()
    assert empty["totals"]["placements"] == 0 and empty["groups"] == []


def test_nothing_accrues_after_now(client: TestClient, ledger: dict[str, Any]) -> None:
    """A window reaching past now ends now: its figures and its FOCUS rows are what accrued
    and was billed, not the future at today's run rate."""
    start = _window(7)["from"]  # NOW is when the module loaded: a serial run reaches here minutes later
    until_now = client.get("/v1/savings", params={"from": start, "to": datetime.now(UTC).isoformat()}).json()
    later = {"from": start, "to": (datetime.now(UTC) + timedelta(days=30)).isoformat()}
    reaching = client.get("/v1/savings", params=later).json()
    assert reaching["totals"]["cost"] == pytest.approx(until_now["totals"]["cost"], rel=1e-4)
    assert datetime.fromisoformat(reaching["to"]) <= datetime.now(UTC)
    rows = list(csv.DictReader(io.StringIO(client.get("/v1/export/focus", params=later).text)))
    assert rows and max(datetime.fromisoformat(x["ChargePeriodEnd"]) for x in rows) <= datetime.now(UTC)
    future = {"from": (NOW + timedelta(days=20)).isoformat(), "to": (NOW + timedelta(days=30)).isoformat()}
    for url in ("/v1/savings", "/v1/export/focus", "/v1/dashboard"):
        r = client.get(url, params=future)
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "from"], url


@pytest.mark.parametrize(
    "params",
    [
        {"group_by": "color"},
        {"from": "2026-12-02T00:00:00Z", "to": "2026-12-01T00:00:00Z"},
        {"from": "yesterday"},
        {"from": "0001-01-01T00:00:00Z"},
    ],
)
def test_bad_savings_queries_are_problem_documents(client: TestClient, params: dict[str, str]) -> None:
    r = client.get("/v1/savings", params=params)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"]


def test_focus_csv_and_parquet(client: TestClient, ledger: dict[str, Any]) -> None:
    params = _window(7)
    r = client.get("/v1/export/focus", params=params)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert rows and list(rows[0]) == list(COLUMN_NAMES)
    assert int(r.headers["x-row-count"]) == len(rows)
    savings = client.get("/v1/savings", params=params).json()
    assert sum(float(x["BilledCost"]) for x in rows) == pytest.approx(savings["totals"]["cost"], abs=1e-2)
    spot_rows = [x for x in rows if x["SkuPriceId"].endswith("/spot")]
    assert spot_rows and {x["PricingCategory"] for x in spot_rows} == {"Dynamic"}
    assert {x["x_Tenant"] for x in rows} == {"default", "globex"}

    p = client.get("/v1/export/focus", params=params, headers={"accept": "application/vnd.apache.parquet"})
    assert p.status_code == 200 and p.headers["content-type"] == "application/vnd.apache.parquet"
    table = pq.read_table(io.BytesIO(p.content))
    assert table.column_names == list(COLUMN_NAMES) and table.num_rows == len(rows)
    explicit = client.get("/v1/export/focus", params={**params, "format": "parquet"})
    assert pq.read_table(io.BytesIO(explicit.content)).num_rows == len(rows)


def test_dashboard_data_rejects_a_window_over_five_years(client: TestClient, ledger: dict[str, Any]) -> None:
    r = client.get("/v1/dashboard", params=_window(6 * 366))
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")


def test_focus_export_rejects_a_window_over_a_year(client: TestClient, ledger: dict[str, Any]) -> None:
    r = client.get("/v1/export/focus", params=_window(400))
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "from"]


def test_cli_export_focus(
    ledger: dict[str, Any], module_db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", module_db_url)
    runner = CliRunner()
    w = _window(7)
    r = runner.invoke(cli, ["export", "focus", "--from", w["from"], "--to", w["to"]])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert rows and list(rows[0]) == list(COLUMN_NAMES)
    out = tmp_path / "focus.parquet"
    r = runner.invoke(
        cli, ["export", "focus", "--from", w["from"], "--to", w["to"], "--format", "parquet", "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert pq.read_table(out).num_rows == len(rows)
    bad = runner.invoke(cli, ["export", "focus", "--from", "last tuesday"])
    assert bad.exit_code == 2


#: --from/--to values that the API reads in a way datetime.fromisoformat does not, or refuses
PARSED_AS_THE_API_DOES = [
    lambda: {"from": (NOW - timedelta(days=5)).date().isoformat(), "to": NOW.date().isoformat()},  # dates
    lambda: {"from": str(int((NOW - timedelta(days=3)).timestamp())), "to": str(int(NOW.timestamp()))},
    lambda: {"from": (NOW - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"), "to": NOW.strftime("%Y-%m-%d %H:%M:%S")},
    # a bare number is Unix seconds to the API (pydantic), not the date 2024-01-01 (fromisoformat)
    lambda: {"from": "20240101", "to": "1970-09-01"},
]
PARSED_IDS = ["dates", "unix-seconds", "naive-times", "compact-digits"]


@pytest.mark.parametrize("window", PARSED_AS_THE_API_DOES, ids=PARSED_IDS)
def test_cli_export_focus_from_to_writes_what_get_export_focus_answers(
    client: TestClient, ledger: dict[str, Any], module_db_url: str, monkeypatch: pytest.MonkeyPatch, window: Any
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", module_db_url)
    w = window()
    r = CliRunner().invoke(cli, ["export", "focus", "--from", w["from"], "--to", w["to"]])
    assert r.exit_code == 0, r.output
    api = client.get("/v1/export/focus", params=w)
    assert api.status_code == 200, api.text
    assert r.stdout_bytes == api.content


@pytest.mark.parametrize("value", ["2024-01-01T00", "2024-1-1", "now", "2024-01-01T24:00"])
@pytest.mark.parametrize("option", ["--from", "--to"])
@pytest.mark.parametrize("command", [["export", "focus"], ["finops", "savings"]], ids=["export", "savings"])
def test_cli_refuses_a_time_the_api_refuses(
    client: TestClient,
    module_db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    option: str,
    value: str,
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", module_db_url)
    api = client.get("/v1/savings", params={option.removeprefix("--"): value})
    assert api.status_code == 422 and api.json()["errors"][0]["loc"] == ["query", option.removeprefix("--")]
    r = CliRunner().invoke(cli, [*command, option, value])
    assert r.exit_code == 2, r.output
    assert f"'{option}'" in r.stderr and r.stdout == ""


def test_cli_savings_names_both_baselines(
    ledger: dict[str, Any], module_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", module_db_url)
    monkeypatch.setenv("COLUMNS", "200")
    r = CliRunner().invoke(cli, ["finops", "savings", "--group-by", "tenant"])
    assert r.exit_code == 0, r.output
    assert "against kubernetes-packer" in r.stdout and "against greedy-cheapest-fit" in r.stdout
    assert "vs greedy/month" in r.stdout


@pytest.mark.parametrize(
    "window",
    [
        lambda: _window(7),  # date-times with their offset
        *PARSED_AS_THE_API_DOES,
    ],
    ids=["datetimes", *PARSED_IDS],
)
def test_cli_savings_from_to_prints_what_get_savings_answers(
    client: TestClient,
    ledger: dict[str, Any],
    module_db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    window: Any,
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", module_db_url)
    w = window()
    r = CliRunner().invoke(cli, ["finops", "savings", "--from", w["from"], "--to", w["to"], "--json"])
    assert r.exit_code == 0, r.output
    api = client.get("/v1/savings", params={"group_by": "provider", **w})
    assert api.status_code == 200, api.text
    assert json.loads(r.stdout) == api.json()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--from", "last tuesday"], "'--from'"),
        (["--to", "2026-13-01"], "'--to'"),
        (["--from", NOW.isoformat(), "--to", (NOW - timedelta(days=1)).isoformat()], "invalid --from"),
        (["--from", "2300-01-01"], "invalid --from"),
    ],
    ids=["not-a-time", "no-such-month", "from-after-to", "out-of-range"],
)
def test_cli_savings_refuses_a_window_the_api_refuses(
    module_db_url: str, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", module_db_url)
    r = CliRunner().invoke(cli, ["finops", "savings", *args])
    assert r.exit_code == 2, r.output
    assert said in r.stderr and r.stdout == ""


def test_dashboard_shows_actual_demand_from_usage_history(
    client: TestClient, fin_broker: Broker, ledger: dict[str, Any]
) -> None:
    from broker.db.forecast_models import UsageSampleRow

    hour = int(NOW.timestamp()) // 3600 * 3600 - 5 * 3600
    samples = [("a", hour, 2.0), ("a", hour + 1800, 4.0), ("b", hour, 10.0), ("a", hour + 3600, 1.0)]
    with fin_broker.sessions.begin() as s:
        s.add_all(UsageSampleRow(tenant="globex", series=n, metric="cpu", ts=t, value=v) for n, t, v in samples)
    doc = client.get("/v1/dashboard", params={"tenant": "globex", **_window(2)}).json()["forecast"]
    assert doc["available"] is True
    # per bucket: each series' mean, summed across series
    assert [p["actual"] for p in doc["series"]] == [pytest.approx(3.0 + 10.0), pytest.approx(1.0)]
    other = client.get("/v1/dashboard", params={"tenant": "default", **_window(2)}).json()["forecast"]
    assert other["available"] is False and other["series"] == []
