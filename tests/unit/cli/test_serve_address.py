"""`broker serve` checks the address before it prepares the database or says it serves: a port
in use is one line naming it and exit 2 (docs/cli.md), never "serving on ..." then an error."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.listening import address_problem
from broker.cli.main import app


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_in_use_is_one_line_and_exit_2_before_anything_is_prepared(
    taken_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "never-made.db"
    monkeypatch.setenv("BROKER_DATABASE_URL", f"sqlite:///{db}")
    result = CliRunner().invoke(app, ["serve", "--port", str(taken_port)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert result.output.strip().splitlines() == [
        f"cannot serve: port {taken_port} on 127.0.0.1 is already in use (another server?); choose another with --port"
    ]
    assert "serving on" not in result.output
    assert not db.exists()  # checked before the database was opened


def test_a_free_port_and_a_port_in_use_are_told_apart(taken_port: int) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    assert address_problem("127.0.0.1", free) is None
    assert "already in use" in str(address_problem("127.0.0.1", taken_port))


def test_a_host_that_does_not_resolve_is_named() -> None:
    assert "cannot resolve --host 'no-such-host.invalid'" in str(address_problem("no-such-host.invalid", 8080))
