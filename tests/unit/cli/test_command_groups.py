"""The CLI's command groups are registered by import (broker/cli/main.py, COMMAND_GROUPS): each
module's `register(app)`, and no command name taken twice (a later registration would silently
replace the earlier command: the one way their order could matter)."""

from __future__ import annotations

import inspect
import pkgutil

import typer

import broker.cli
from broker.cli.main import COMMAND_GROUPS, app


def _names(typer_app: typer.Typer) -> list[str]:
    commands = [
        c.name or (c.callback.__name__.replace("_", "-") if c.callback else "") for c in typer_app.registered_commands
    ]
    groups = [g.name or "" for g in typer_app.registered_groups]
    return commands + groups


def test_no_command_name_is_registered_twice():
    names = _names(app)
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_every_module_with_a_register_function_is_a_command_group():
    registering = set()
    for m in pkgutil.iter_modules(broker.cli.__path__):
        module = __import__(f"broker.cli.{m.name}", fromlist=["register"])
        if inspect.isfunction(getattr(module, "register", None)) and module.register.__module__ == module.__name__:
            registering.add(m.name)
    assert {r.__module__.rsplit(".", 1)[1] for r in COMMAND_GROUPS} == registering
