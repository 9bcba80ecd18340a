"""`broker clusters add` with a name or namespace Kubernetes refuses: exit 2, naming the option and why,
before any database is opened."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("name", "namespace", "option", "value"),
    [
        ("shop-eu", "Shop", "--namespace", "Shop"),
        ("shop-eu", "shop_eu", "--namespace", "shop_eu"),
        ("shop-eu", "n" * 64, "--namespace", "n" * 64),
        ("Shop-EU", "shop", "NAME", "Shop-EU"),
        ("shop-", "shop", "NAME", "shop-"),
    ],
)
def test_a_name_or_namespace_that_is_no_dns_label_names_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, namespace: str, option: str, value: str
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", f"sqlite:///{tmp_path / 'b.db'}")
    args = ["clusters", "add", name, "--site", "aws:eu-central-1", "--gitops-dir", str(tmp_path)]
    r = runner.invoke(app, [*args, "--namespace", namespace])
    assert r.exit_code == EXIT_INVALID, r.output
    said = " ".join(r.stderr.split())  # rich wraps at the terminal's width
    assert f"invalid {option} {value!r}:" in said and "DNS-1123 label" in said, r.stderr
    assert r.stdout == ""
    assert not (tmp_path / "b.db").exists()  # refused before anything was opened
