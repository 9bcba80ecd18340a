"""Bad input to the reporting commands is one message and exit 2 naming the option or the path,
never a traceback: an unknown `finops savings --group-by`, an `-o`/`--out` path that cannot be
written (a folder that does not exist, a file where a folder should be)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def _one_message(r: Result, *said: str) -> None:
    assert r.exit_code == EXIT_INVALID, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    for s in said:
        assert s in r.stderr, r.stderr


def test_finops_savings_names_a_bad_group_by(env: str) -> None:
    r = runner.invoke(app, ["finops", "savings", "--group-by", "colour"])
    _one_message(r, "invalid --group-by", "'colour'", "capacity_type")
    assert r.stdout == ""
    assert runner.invoke(app, ["finops", "savings", "--group-by", "capacity_type", "--json"]).exit_code == 0


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_focus_names_an_output_it_cannot_write(env: str, tmp_path: Path, fmt: str) -> None:
    target = tmp_path / "nonexistent" / "dir" / f"x.{fmt}"
    r = runner.invoke(app, ["export", "focus", "--format", fmt, "-o", str(target)])
    _one_message(r, "cannot write --output", "No such file or directory")
    assert "x." in r.stderr and not target.exists()


def test_export_focus_to_a_folder_is_refused_too(env: str, tmp_path: Path) -> None:
    _one_message(runner.invoke(app, ["export", "focus", "-o", str(tmp_path)]), "cannot write --output")


def test_simulate_names_an_out_folder_it_cannot_make_before_running(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = runner.invoke(app, ["simulate", str(EXAMPLES / "fleet.yaml"), "--days", "0.25", "--out", str(blocker / "out")])
    _one_message(r, "cannot write --out", "a-file")
    assert "kube-default" not in r.stdout  # it stopped before simulating


def test_forecast_evaluate_names_a_predictions_out_it_cannot_write(tmp_path: Path) -> None:
    history = tmp_path / "history.csv"
    rows = ["series_id,timestamp,value"]
    rows += [f"s{s},{1_700_000_000 + 300 * i},{1 + s + (i % 12) / 10}" for s in range(2) for i in range(600)]
    history.write_text("\n".join(rows) + "\n")
    r = runner.invoke(
        app,
        [
            "forecast", "evaluate", "--history", str(history), "--horizon", "12", "--rounds", "5",
            "--predictions-out", str(tmp_path / "missing" / "p.csv"),
        ],
    )  # fmt: skip
    _one_message(r, "cannot write --predictions-out", "missing")
