"""One --tenant for every command that reads or writes a tenant's records (broker/cli/options.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer
from typer.core import TyperGroup

from broker.cli.main import app
from broker.cli.options import tenant_name

# --tenant as a filter over every tenant's records (omitted: all of them), not the tenant acted for
FILTERS = {"finops savings", "export focus"}
# commands over tenant-owned records that must take --tenant
OWNERS = {
    "place", "replan", "dispatch", "clusters add", "clusters list", "clusters remove", "budget set", "budget show",
    "apikey create", "apikey list", "apikey revoke", "usage import", "usage pull", "usage show", "forecast train",
    "forecast models", "latency import",
}  # fmt: skip


def _commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(group, TyperGroup):
        for name, sub in group.commands.items():
            yield from _commands(sub, f"{prefix} {name}".strip())
    else:
        yield prefix, group


def test_every_tenant_option_is_the_shared_one() -> None:
    commands = dict(_commands(typer.main.get_command(app)))
    with_tenant = {
        name: next(p for p in cmd.params if p.name == "tenant")
        for name, cmd in commands.items()
        if any(p.name == "tenant" for p in cmd.params)
    }
    assert set(with_tenant) >= OWNERS, sorted(OWNERS - set(with_tenant))
    for name, param in with_tenant.items():
        if name in FILTERS:
            continue
        assert getattr(param.callback, "__wrapped__", None) is tenant_name, name  # typer wraps the callback
        assert param.opts == ["--tenant"], name
