"""`broker place --format markdown|json` when no plan passes: infeasible (exit 3) and over a budget
(exit 4) still print a document on stdout, embedded and against a server, beside the one-line
message on stderr; a pipeline posting stdout as a pull-request comment posts what failed and why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INFEASIBLE, EXIT_INVALID, EXIT_OVER_LIMIT
from broker.cli.main import app
from tests.e2e.live_server import serving

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


@pytest.fixture()
def env(db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    monkeypatch.delenv("BROKER_API_KEY", raising=False)
    return db_url


@pytest.fixture()
def server(env: str) -> Iterator[str]:
    from broker.app import Broker
    from broker.settings import Settings

    b = Broker.open(Settings(database_url=env))
    try:
        with serving(b) as port:
            yield f"http://127.0.0.1:{port}"
    finally:
        b.close()


def _over_budget(env: str, server: str | None) -> None:
    """A 100 USD/month budget for the default tenant: the checkout example commits more."""
    if server:
        assert httpx.put(f"{server}/v1/budgets", json={"monthly_usd": 100}).status_code == 200
    else:
        assert runner.invoke(app, ["budget", "set", "--tenant", "default", "--monthly-usd", "100"]).exit_code == 0


def _place(file: Path, fmt: str, server: str | None) -> Result:
    return runner.invoke(app, ["place", "-f", str(file), "--format", fmt, *(["--server", server] if server else [])])


@pytest.mark.parametrize("remote", [False, True], ids=["embedded", "server"])
def test_infeasible_prints_a_comment_and_a_document(request: pytest.FixtureRequest, env: str, remote: bool) -> None:
    server = request.getfixturevalue("server") if remote else None
    md = _place(EXAMPLES / "impossible.yaml", "markdown", server)
    assert md.exit_code == EXIT_INFEASIBLE, md.output
    assert md.stdout.startswith("### Placement `impossible` — ❌ infeasible")
    assert "- `residency:gdpr-eu on checkout-api`" in md.stdout
    assert "infeasible" in md.stderr and "residency:gdpr-eu on checkout-api" in md.stderr
    js = _place(EXAMPLES / "impossible.yaml", "json", server)
    assert js.exit_code == EXIT_INFEASIBLE, js.output
    doc = json.loads(js.stdout)
    assert doc["status"] == "infeasible" and "residency:gdpr-eu on checkout-api" in doc["conflicts"]


@pytest.mark.parametrize("remote", [False, True], ids=["embedded", "server"])
def test_over_a_budget_prints_a_comment_and_a_document(
    request: pytest.FixtureRequest, env: str, tmp_path: Path, remote: bool
) -> None:
    server = request.getfixturevalue("server") if remote else None
    _over_budget(env, server)
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    f = tmp_path / "req.yaml"
    f.write_text(yaml.safe_dump(doc))
    md = _place(f, "markdown", server)
    assert md.exit_code == EXIT_OVER_LIMIT, md.output
    assert md.stdout.startswith("### Placement `checkout rollout` — ❌ over budget")
    assert "| tenant | $100.00 | $0.00 |" in md.stdout  # the budget, nothing committed yet
    assert "over budget" in md.stderr
    js = _place(f, "json", server)
    assert js.exit_code == EXIT_OVER_LIMIT, js.output
    out = json.loads(js.stdout)
    assert out["status"] == "over_budget" and out["budget"]["monthly_usd"] == 100
    assert out["budget"]["projected"] > 100 and "over budget" in js.stderr
    table = _place(f, "table", server)
    assert table.exit_code == EXIT_OVER_LIMIT and table.stdout == ""  # a table has no failure document


@pytest.mark.parametrize("fmt", ["json", "markdown", "table"])
def test_an_invalid_request_is_a_message_on_stderr_whatever_the_format(env: str, tmp_path: Path, fmt: str) -> None:
    f = tmp_path / "req.yaml"
    f.write_text("name: web\nworkloads: [{name: a, replicas: -2, cpu: 1, memory_gib: 1}]\n")
    r = _place(f, fmt, None)
    assert r.exit_code == EXIT_INVALID, r.output
    assert "invalid request" in r.stderr and "replicas" in r.stderr  # the message names the field
    if fmt == "json":
        doc = json.loads(r.stdout)  # the document on stdout as well
        assert doc["status"] == "invalid" and any("replicas" in e["loc"] for e in doc["errors"])
    elif fmt == "markdown":
        assert r.stdout.startswith("### Placement `web` — ❌ invalid request") and "replicas" in r.stdout


def test_infeasible_with_json_says_so_on_stderr_too(env: str) -> None:
    r = _place(EXAMPLES / "impossible.yaml", "json", None)
    assert r.exit_code == EXIT_INFEASIBLE, r.output
    assert r.stderr.startswith("infeasible:") and "residency:gdpr-eu on checkout-api" in r.stderr
    assert json.loads(r.stdout)["status"] == "infeasible"
