"""`broker place --format markdown` as a CI/CD gate, embedded, on a real catalog."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from broker.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_markdown_comment_diffs_against_the_stored_placement_and_gates_on_cost(
    db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text()) | {"dry_run": False}
    request = tmp_path / "placement.yaml"
    request.write_text(yaml.safe_dump(doc))
    runner = CliRunner()

    first = runner.invoke(app, ["place", "-f", str(request), "--format", "markdown"])
    assert first.exit_code == 0, first.output
    assert "No stored placement of this name yet" in first.stdout
    assert "**Residency**" in first.stdout and "❌" not in first.stdout  # gdpr-eu holds, SLOs hold
    assert "**Latency SLOs**" in first.stdout

    second = runner.invoke(
        app, ["place", "-f", str(request), "--format", "markdown", "--max-cost-per-hour", "0.0001",
              "--max-increase-pct", "50"],
    )  # fmt: skip
    assert second.exit_code == 4, second.output
    assert "Against stored placement `pl_" in second.stdout
    assert "**Cost gate**" in second.stdout
    assert "| cost ≤ $0.0001/h |" in second.stdout and "❌ over" in second.stdout
    assert "| increase ≤ 50% |" in second.stdout
