"""The `broker` CLI end to end: embedded and against a running server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
import yaml
from typer.testing import CliRunner

from broker.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_place_embedded_json(env: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] in ("optimal", "feasible") and doc["cost_per_hour"] > 0
    assert doc["node_assignments"]  # CP-SAT's and HiGHS' logs stay off stdout: the JSON parses


def test_place_table_and_markdown(env: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml")])
    assert r.exit_code == 0 and "checkout-api" in r.stdout and "lower bound" in r.stdout
    assert "packed replica by replica" in r.stdout  # the node counts of exact packing
    md = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--format", "markdown"])
    assert md.exit_code == 0 and md.stdout.startswith("### Placement `checkout rollout`")
    assert "| checkout-api |" in md.stdout


def test_exit_3_on_infeasible(env: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(EXAMPLES / "impossible.yaml")])
    assert r.exit_code == 3
    assert "residency:gdpr-eu on checkout-api" in r.output


@pytest.mark.parametrize(
    "content",
    [
        "name: x\nworkloads: [{name: a, replicas: 0, cpu: 1, memory_gib: 1}]\n",
        "{{{ not yaml",
        "just a string\n",
        # a country code that does not exist: invalid (2), not infeasible (3)
        "name: x\nworkloads: [{name: a, replicas: 1, cpu: 1, memory_gib: 1, residency: {allowed_countries: [XX]}}]\n",
    ],
)
def test_exit_2_on_invalid_input(env: str, tmp_path: Path, content: str) -> None:
    f = tmp_path / "req.yaml"
    f.write_text(content)
    r = runner.invoke(app, ["place", "-f", str(f)])
    assert r.exit_code == 2, r.output


def test_exit_2_on_missing_file(env: str, tmp_path: Path) -> None:
    assert runner.invoke(app, ["place", "-f", str(tmp_path / "missing.yaml")]).exit_code == 2


def test_exit_4_over_cost_limit(env: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--max-cost-per-hour", "0.01"])
    assert r.exit_code == 4 and "over limit" in r.output
    ok = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--max-cost-per-hour", "1000"])
    assert ok.exit_code == 0


def test_exit_4_when_cost_rises_over_the_stored_placement(env: str, tmp_path: Path) -> None:
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    doc["dry_run"] = False
    f = tmp_path / "req.yaml"
    f.write_text(yaml.safe_dump(doc))
    assert runner.invoke(app, ["place", "-f", str(f)]).exit_code == 0  # stored
    doc["workloads"][0]["replicas"] = 12  # twice the API replicas
    f.write_text(yaml.safe_dump(doc))
    r = runner.invoke(app, ["place", "-f", str(f), "--max-increase-pct", "10"])
    assert r.exit_code == 4 and "rises" in r.output


def test_catalog_load_is_idempotent(env: str) -> None:
    for _ in range(2):
        r = runner.invoke(app, ["catalog", "load"])
        assert r.exit_code == 0 and "190974 pools" in r.stdout.replace(",", "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def server(env: str) -> Iterator[str]:
    from api.app import create_app

    port = _free_port()
    config = uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url
    srv.should_exit = True
    thread.join(timeout=10)


def test_place_against_a_server(server: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--server", server, "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["cost_per_hour"] > 0
    bad = runner.invoke(app, ["place", "-f", str(EXAMPLES / "impossible.yaml"), "--server", server])
    assert bad.exit_code == 3
