"""`broker serve` checks its address before it prepares anything or says it serves.

Without the check, a port already taken was found only by uvicorn, after the database and the
catalog were prepared and after "serving on ..." was printed: a claim, then a traceback-like
error and exit 3 (which the exit-code map means as infeasible).
"""

from __future__ import annotations

import errno
import socket

import typer
from rich.console import Console
from rich.markup import escape

from broker.cli.exit_codes import EXIT_INVALID


def address_problem(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on now (None: it can), binding as uvicorn does
    (SO_REUSEADDR, so a port left in TIME_WAIT by a stopped server still counts as free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except socket.gaierror as exc:
            return f"cannot resolve --host {host!r}: {exc.strerror}"
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is already in use (another server?); choose another with --port"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def check_address_or_exit(host: str, port: int) -> None:
    """One line on stderr and exit 2 when the server could not listen where it was asked to."""
    problem = address_problem(host, port)
    if problem is not None:
        Console(stderr=True).print(f"[red]cannot serve:[/red] {escape(problem)}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID)
