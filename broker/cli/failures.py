"""How every `broker` command tells the user what was wrong with the input: one wording, on stderr."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from broker.cli.exit_codes import EXIT_INVALID
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


def print_invalid_options(exc: InvalidRequest, options: Mapping[str, str]) -> None:
    """An error the service reports against its query parameters (`loc: ["query", "group_by"]`),
    told in the command's words: `invalid --group-by: cannot group by 'colour' (one of ...)`."""
    said = False
    for e in exc.errors:
        option = options.get(str((e.get("loc") or [""])[-1]))
        if option is not None:
            msg = escape(str(e.get("msg")))
            err.print(f"[red]invalid {option}:[/red] {escape(exc.detail)} ({msg})", soft_wrap=True)
            said = True
    if not said:
        err.print(f"[red]invalid:[/red] {escape(exc.detail)}", soft_wrap=True)


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


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Write to `path` in the block: a path that cannot be written (no such directory, a directory,
    no permission) is one message naming the option and the path, exit 2, not a traceback."""
    try:
        yield
    except OSError as exc:
        why = escape(exc.strerror or str(exc))
        err.print(f"[red]cannot write {option} {escape(str(path))}:[/red] {why}", soft_wrap=True)  # one line
        raise typer.Exit(EXIT_INVALID) from exc
