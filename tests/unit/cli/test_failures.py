"""A BrokerError inside a command becomes its detail on stderr and the exit code the command names."""

from __future__ import annotations

import pytest
import typer

from broker.cli.exit_codes import EXIT_FAILED
from broker.cli.failures import exits_on_error
from broker.errors import NotFound


def test_broker_error_exits_with_the_given_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exc, exits_on_error(EXIT_FAILED):
        raise NotFound("no key k1")
    assert exc.value.exit_code == EXIT_FAILED
    captured = capsys.readouterr()
    assert "no key k1" in captured.err and captured.out == ""


def test_other_errors_pass_through() -> None:
    with pytest.raises(KeyError), exits_on_error(EXIT_FAILED):
        raise KeyError("a bug is not a user error")
