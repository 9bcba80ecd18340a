"""`broker replan --replicas WORKLOAD=N`: a malformed pair is exit 2 naming the option and the form
it takes, before anything is opened (it said "invalid literal for int() with base 10")."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("pair", ["a=abc", "a=1.5", "a=", "=3", "a"])
def test_a_bad_replicas_pair_names_the_option_and_its_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pair: str
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", f"sqlite:///{tmp_path / 'unused.db'}")
    r = runner.invoke(app, ["replan", "pl_1", "--replicas", pair])
    assert r.exit_code == EXIT_INVALID, r.output
    assert "--replicas must look like WORKLOAD=N" in r.stderr
    assert "int()" not in r.output
    assert not (tmp_path / "unused.db").exists()  # refused before the database is opened
