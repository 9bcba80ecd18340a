"""Stale prices are said where a user looks: the answer's warnings and the CLI's outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.app import Broker
from broker.cli.main import app
from broker.settings import Settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _stale(w: str) -> bool:
    return w.startswith("stale prices:")


@pytest.mark.parametrize("days", [0.001, 3650.0])  # every bundled price is stale / none is
def test_the_answer_warns_once_with_the_count(db_url: str, days: float) -> None:
    from api.app import create_app

    broker = Broker.open(Settings(database_url=db_url, price_stale_after_days=days))
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    with TestClient(create_app(broker=broker)) as client:
        out = client.post("/v1/placements", json=doc).json()
    stale = out["price_snapshot"]["stale_pools"]
    warnings = [w for w in out["warnings"] if _stale(w)]
    if days > 1:
        assert stale == [] and warnings == []
        return
    assert stale and len(warnings) == 1
    assert f"{len(stale)} of {len(out['price_snapshot']['pools'])} pools" in warnings[0]
    assert "oldest " in warnings[0] and " days (" in warnings[0]


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_the_cli_prints_it(db_url: str, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    monkeypatch.setenv("BROKER_PRICE_STALE_AFTER_DAYS", "0.001")
    monkeypatch.setenv("COLUMNS", "400")
    r = CliRunner().invoke(app, ["place", "-f", str(EXAMPLES / "checkout.yaml"), "--format", fmt])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stdout.splitlines() if "stale prices:" in line]
    assert len(lines) == 1, r.stdout
    assert lines[0].startswith("warning: stale prices:" if fmt == "table" else "> :warning: stale prices:")
