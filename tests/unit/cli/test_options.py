"""Every numeric gate, limit or amount option refuses NaN, infinities and negatives: exit 2 naming
the option, before anything is read, solved or stored (click's FLOAT parses `nan` and `inf`, and a
gate `--max-cost-per-hour nan` used to pass every plan)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "checkout.yaml")
runner = CliRunner()

# (command line before the option, option): each option is a float the command compares or stores
OPTIONS = [
    (["place", "-f", EXAMPLE], "--max-cost-per-hour"),
    (["place", "-f", EXAMPLE], "--max-increase-pct"),
    (["place", "-f", EXAMPLE, "--server", "http://broker.test"], "--timeout"),
    (["budget", "set", "--tenant", "t"], "--monthly-usd"),
    (["replan", "pl_1"], "--migration-cost"),
    (["kueue-dispatcher"], "--round-seconds"),
    (["pricing", "discount", "--provider", "aws"], "--pct"),
    (
        ["pricing", "commit", "--site", "aws:eu-central-1", "--instance-type", "m6i.xlarge", "--count", "1"],
        "--usd-per-hour",
    ),
    (["simulate", EXAMPLE], "--days"),
    (["usage", "pull", "--prometheus", "http://prom.test", "--query", "up"], "--hours"),
    (["usage", "pull", "--prometheus", "http://prom.test", "--query", "up"], "--end"),
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
@pytest.mark.parametrize(("command", "option"), OPTIONS, ids=[o for _, o in OPTIONS])
def test_a_numeric_option_refuses_nan_infinities_and_negatives(command: list[str], option: str, value: str) -> None:
    r = runner.invoke(app, [*command, option, value])
    assert r.exit_code == EXIT_INVALID, r.output
    assert option in r.stderr and "finite number" in r.stderr
    assert r.stdout == ""


def test_an_option_with_a_floor_above_zero_names_the_floor() -> None:
    r = runner.invoke(app, ["kueue-dispatcher", "--round-seconds", "0.5"])
    assert r.exit_code == EXIT_INVALID and "≥ 1" in r.stderr  # this one's floor is 1 s
