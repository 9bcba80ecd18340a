"""`broker usage import|pull` and `broker forecast evaluate|train|models` end to end (real SQLite)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from broker.app import Broker
from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app
from broker.db.forecast_models import UsageSampleRow
from broker.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usage"
runner = CliRunner()


def stored(db_url: str) -> int:
    with Broker.open(Settings(database_url=db_url), prepare=False).sessions() as s:
        return int(s.scalar(select(func.count()).select_from(UsageSampleRow)) or 0)


def test_import_then_reimport_replaces_the_window(env: str, tmp_path: Path) -> None:
    src = pd.read_csv(FIXTURES / "bitbrains_3x4d.csv.gz")
    path = tmp_path / "usage.csv"
    src.to_csv(path, index=False)
    r = runner.invoke(app, ["usage", "import", str(path)])
    assert r.exit_code == 0, r.output
    assert f"imported {len(src)} samples of 3 series" in r.stdout
    again = runner.invoke(app, ["usage", "import", str(path)])
    assert again.exit_code == 0 and f"replaced {len(src)}" in again.stdout
    assert stored(env) == len(src)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("series_id,timestamp,value\na,0,1\na,300,-1\n", "line.3.value: negative usage"),
        ("series_id,timestamp,value\na,0,1\na,300,lots\n", "line.3.value: not a finite number"),
        ("series_id,timestamp,value\na,soon,1\n", "line.2.timestamp"),
        ("series,when,value\na,0,1\n", "missing column"),
    ],
)
def test_invalid_file_exits_2_and_stores_nothing(env: str, tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    r = runner.invoke(app, ["usage", "import", str(path)])
    assert r.exit_code == 2
    assert message in r.output.replace("\n", " ")
    assert stored(env) == 0


def test_forecast_evaluate_writes_predictions(env: str, tmp_path: Path) -> None:
    out = tmp_path / "pred.csv"
    r = runner.invoke(
        app,
        [
            "forecast",
            "evaluate",
            "--history",
            str(FIXTURES / "azure_4x4d.csv.gz"),
            "--horizon",
            "96",
            "--predictions-out",
            str(out),
            "--rounds",
            "15",
        ],
    )
    assert r.exit_code == 0, r.output
    for name in ("selected", "xgboost", "seasonal_naive", "last_value", "weekly_median"):
        assert name in r.stdout
    pred = pd.read_csv(out)
    assert list(pred.columns) == ["series_id", "timestamp", "p50", "p95"]
    assert len(pred) == 4 * 96 and (pred["p95"] >= pred["p50"]).all()
    hist = pd.read_csv(FIXTURES / "azure_4x4d.csv.gz")
    last = hist.groupby("series_id")["timestamp"].max()
    held = hist[hist["timestamp"] > hist["series_id"].map(last) - 96 * 300]
    assert set(zip(pred["series_id"], pred["timestamp"], strict=True)) == set(
        zip(held["series_id"], held["timestamp"], strict=True)
    )


def test_forecast_evaluate_days_scores_each_held_out_day_and_every_metric(env: str, tmp_path: Path) -> None:
    hist = pd.read_csv(FIXTURES / "azure_4x4d.csv.gz")
    # a second metric of the same series (a memory-like level): both are evaluated, in turn
    both = pd.concat([hist.assign(metric="cpu"), hist.assign(metric="memory_gib", value=hist["value"] / 10 + 1)])
    path, out = tmp_path / "both.csv", tmp_path / "pred.csv"
    both.to_csv(path, index=False)
    args = ["forecast", "evaluate", "--history", str(path), "--horizon", "96", "--days", "2", "--rounds", "8"]
    r = runner.invoke(app, [*args, "--predictions-out", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    for metric in ("cpu", "memory_gib"):
        assert f"{metric}: day -1" in r.stdout and f"{metric}: day -0" in r.stdout
        assert f"{metric}: all 2 days pooled" in r.stdout
    for name in ("selected", "xgboost", "seasonal_naive", "weekly_median", "blend_yday_weekly", "median_last_week"):
        assert name in r.stdout
    assert "median_last_2_weeks" in r.stdout and "the best fixed rule above" in r.stdout
    assert "selected p95 coverage" in r.stdout and "promised 95 %" in r.stdout
    pred = pd.read_csv(out)
    assert list(pred.columns) == ["series_id", "timestamp", "p50", "p95", "metric"]
    assert len(pred) == 2 * 4 * 96 and (pred["p95"] >= pred["p50"]).all()


@pytest.mark.parametrize(("extra", "message"), [(["--days", "9"], "too little history"), (["--days", "-1"], "--days")])
def test_forecast_evaluate_days_beyond_the_history_is_a_clear_error(env: str, extra: list[str], message: str) -> None:
    args = ["forecast", "evaluate", "--history", str(FIXTURES / "azure_4x4d.csv.gz"), "--horizon", "144"]
    r = runner.invoke(app, [*args, *extra])
    assert r.exit_code == 2 and message in r.output.replace("\n", " ")


def test_forecast_evaluate_rejects_bad_history(env: str, tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("series_id,timestamp,value\na,0,1\na,300,x\n")
    r = runner.invoke(app, ["forecast", "evaluate", "--history", str(path), "--horizon", "1"])
    assert r.exit_code == 2 and "not a finite number" in r.output


class _Prometheus(BaseHTTPRequestHandler):
    seen: list[dict[str, list[str]]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        _Prometheus.seen.append(parse_qs(url.query))
        body = (FIXTURES / "prometheus_query_range.json").read_bytes() if url.path == "/api/v1/query_range" else b"{}"
        self.send_response(200 if url.path == "/api/v1/query_range" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def prometheus() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_usage_pull_from_prometheus(env: str, prometheus: str) -> None:
    _Prometheus.seen.clear()
    r = runner.invoke(
        app,
        [
            "usage",
            "pull",
            "--prometheus",
            prometheus,
            "--query",
            'sum by (pod) (rate(x{ns="shop"}[5m]))',
            "--series-label",
            "pod",
            "--hours",
            "48",
            "--end",
            "1733184000",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads((FIXTURES / "prometheus_query_range.json").read_text())
    n = sum(len(x["values"]) for x in doc["data"]["result"])
    assert f"pulled {n} samples of 2 series" in r.stdout and "checkout-7d9f-abc" in r.stdout
    q = _Prometheus.seen[0]
    assert q["query"] == ['sum by (pod) (rate(x{ns="shop"}[5m]))'] and q["step"] == ["300s"]
    assert float(q["end"][0]) - float(q["start"][0]) == 48 * 3600
    first = float(doc["data"]["result"][0]["values"][0][1])
    with Broker.open(Settings(database_url=env), prepare=False).sessions() as s:
        row = s.scalars(
            select(UsageSampleRow).where(UsageSampleRow.series == "checkout-7d9f-abc").order_by(UsageSampleRow.ts)
        ).first()
    assert row is not None and row.value == pytest.approx(first) and row.metric == "cpu"


def test_usage_pull_one_name_for_many_series_is_refused(env: str, prometheus: str) -> None:
    r = runner.invoke(app, ["usage", "pull", "--prometheus", prometheus, "--query", "q", "--series", "one"])
    assert r.exit_code == 2 and "returned 2" in r.output


def test_train_stores_a_versioned_model(env: str) -> None:
    assert runner.invoke(app, ["usage", "import", str(FIXTURES / "azure_4x4d.csv.gz")]).exit_code == 0
    for _ in range(2):
        r = runner.invoke(app, ["forecast", "train", "--horizon", "48", "--rounds", "8"])
        assert r.exit_code == 0, r.output
    listing = runner.invoke(app, ["forecast", "models"])
    assert listing.exit_code == 0
    assert "│ 2 " in listing.stdout and "│ 1 " in listing.stdout
    # a model is its tenant's: alpha has none, and no usage to learn from
    alpha = runner.invoke(app, ["forecast", "models", "--tenant", "alpha"])
    assert alpha.exit_code == 0 and "│ 1 " not in alpha.stdout
    nothing = runner.invoke(app, ["forecast", "train", "--tenant", "alpha", "--horizon", "48", "--rounds", "8"])
    assert nothing.exit_code == 1 and "no usage stored" in nothing.output
    for cmd in (["forecast", "models"], ["forecast", "train"]):
        bad = runner.invoke(app, [*cmd, "--tenant", "Not A Tenant"])
        assert bad.exit_code == EXIT_INVALID and "invalid tenant name" in bad.output, bad.output
