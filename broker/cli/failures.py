"""How every `broker` command tells the user what was wrong with the input: one wording, on stderr."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from broker.errors import BrokerError, Infeasible, InvalidRequest

err = Console(stderr=True)


def print_invalid(exc: InvalidRequest, what: str) -> None:
    """`invalid <what>: detail`, then each offending field (`loc: msg`) the detail does not
    already say."""
    err.print(f"[red]invalid {what}:[/red] {exc.detail}")
    for e in exc.errors:
        loc = ".".join(str(p) for p in e.get("loc", []))
        # said already: the message, with its field (a file's errors name the file itself)
        named = loc == "file" or f"{loc}:" in exc.detail
        if str(e.get("msg")) not in exc.detail or not named:
            err.print(f"  - {loc}: {e.get('msg')}")


def print_infeasible(exc: Infeasible) -> None:
    """`infeasible: detail`, then the conflicting constraints."""
    err.print(f"[red]infeasible:[/red] {exc.detail}")
    for c in exc.conflicts:
        err.print(f"  - {c}")


@contextmanager
def exits_on_error(code: int) -> Iterator[None]:
    """Run the block; a BrokerError from it becomes its detail on stderr and exit `code` (exit_codes.py)."""
    try:
        yield
    except BrokerError as exc:
        err.print(f"[red]{exc.detail}[/red]")
        raise typer.Exit(code) from exc
