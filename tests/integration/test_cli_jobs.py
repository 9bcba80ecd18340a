"""`broker place --server` against the real API when the server queues the request as a job:
a server whose BROKER_MAX_WORKLOADS_SYNC is 1 answers 202 for the two-workload example, and the
command polls the job to its placement (or its problem) with nothing but the document on stdout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from broker.app import Broker
from broker.cli.exit_codes import EXIT_INFEASIBLE, EXIT_OK, EXIT_OVER_LIMIT
from broker.cli.main import app
from broker.settings import Settings
from tests.e2e.live_server import serving

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


@pytest.fixture()
def server(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    monkeypatch.delenv("BROKER_API_KEY", raising=False)
    b = Broker.open(Settings(database_url=db_url, max_workloads_sync=1))  # jobs run in the API process
    try:
        with serving(b) as port:
            yield f"http://127.0.0.1:{port}"
    finally:
        b.close()


def test_a_large_request_is_queued_polled_and_printed(server: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--server", server, "--format", "json"])
    assert r.exit_code == EXIT_OK, r.output
    doc = json.loads(r.stdout)  # stdout: the placement document only
    assert doc["status"] in ("optimal", "feasible") and doc["cost_per_hour"] > 0
    assert {a["workload"] for a in doc["assignments"]} == {"checkout-api", "orders-db"}
    assert "queued as job" in r.stderr and "succeeded" in r.stderr
    jobs = httpx.get(f"{server}/v1/jobs").json()["items"]
    assert jobs[0]["status"] == "succeeded" and jobs[0]["result"]["cost_per_hour"] == doc["cost_per_hour"]
    table = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--server", server])
    assert table.exit_code == EXIT_OK and "checkout-api" in table.stdout and "job" not in table.stdout


def test_an_infeasible_job_exits_3_with_the_conflicts(server: str, tmp_path: Path) -> None:
    doc = yaml.safe_load((EXAMPLES / "impossible.yaml").read_text())
    doc["async"] = True  # one workload: queued because it asks
    f = tmp_path / "req.yaml"
    f.write_text(yaml.safe_dump(doc))
    r = runner.invoke(app, ["place", "-f", str(f), "--server", server, "--format", "json"])
    assert r.exit_code == EXIT_INFEASIBLE, r.output
    out = json.loads(r.stdout)
    assert out["status"] == "infeasible" and "residency:gdpr-eu on checkout-api" in out["conflicts"]
    assert "queued as job" in r.stderr


def test_a_job_over_the_budget_exits_4(server: str, tmp_path: Path) -> None:
    assert httpx.put(f"{server}/v1/budgets", json={"monthly_usd": 1}).status_code == 200
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    doc["dry_run"] = False
    f = tmp_path / "req.yaml"
    f.write_text(yaml.safe_dump(doc))
    r = runner.invoke(app, ["place", "-f", str(f), "--server", server])
    assert r.exit_code == EXIT_OVER_LIMIT, r.output
    assert "over budget" in r.stderr and r.stdout == ""
