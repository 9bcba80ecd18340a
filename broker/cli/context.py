"""What every `broker` command shares: the settings and one Broker per invocation.

The app's callback puts an `Edge` in typer's context; nothing is read or opened until a
command asks, so `broker --help` and the commands that only read files open no database
(and run no migrations), and a command that does opens it once, however many parts use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from broker.cli.exit_codes import EXIT_INVALID
from broker.settings import Settings, settings_problems

if TYPE_CHECKING:
    from broker.app import Broker


class Edge:
    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._broker: Broker | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    def broker(self) -> Broker:
        """The invocation's Broker: the database migrated and the catalog loaded if empty."""
        if self._broker is None:
            from broker.app import Broker

            self._broker = Broker.open(self.settings)
        return self._broker

    def close(self) -> None:
        if self._broker is not None:
            self._broker.close()


def load_settings() -> Settings:
    """The environment's settings; an invalid BROKER_* variable is one line naming it and the form
    it expects, exit 2, not a traceback (every command and `broker serve` read them here)."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError
    from rich.console import Console

    try:
        return Settings()
    except (ValidationError, SettingsError) as exc:
        err = Console(stderr=True)
        for line in settings_problems(exc):
            err.print(line, style="red", soft_wrap=True, markup=False, highlight=False)
        raise typer.Exit(EXIT_INVALID) from None


def edge(ctx: typer.Context) -> Edge:
    """The Edge the app's callback made (`ensure_object` makes one for a command run on its own)."""
    return ctx.ensure_object(Edge)
