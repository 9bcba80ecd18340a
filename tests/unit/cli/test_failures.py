"""A BrokerError inside a command becomes its detail on stderr and the exit code the command names."""

from __future__ import annotations

import pytest
import typer

from broker.cli.exit_codes import EXIT_FAILED
from broker.cli.failures import exits_on_error, print_invalid
from broker.errors import InvalidRequest, NotFound


def test_broker_error_exits_with_the_given_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exc, exits_on_error(EXIT_FAILED):
        raise NotFound("no key k1")
    assert exc.value.exit_code == EXIT_FAILED
    captured = capsys.readouterr()
    assert "no key k1" in captured.err and captured.out == ""


def test_other_errors_pass_through() -> None:
    with pytest.raises(KeyError), exits_on_error(EXIT_FAILED):
        raise KeyError("a bug is not a user error")


def test_a_field_the_detail_already_names_is_not_repeated(capsys: pytest.CaptureFixture[str]) -> None:
    errors = [{"loc": ["policies"], "msg": "unknown policy 'x'"}, {"loc": ["days"], "msg": "too long"}]
    detail = "the fleet is invalid: policies: unknown policy 'x' (and 1 more)"
    print_invalid(InvalidRequest(detail, errors=errors), "fleet")
    err = capsys.readouterr().err
    assert err.count("unknown policy 'x'") == 1 and "  - days: too long" in err
    print_invalid(InvalidRequest("f.yaml is not valid YAML: bad", errors=[{"loc": ["file"], "msg": "bad"}]), "fleet")
    assert "  - file" not in capsys.readouterr().err
