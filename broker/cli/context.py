"""What every `broker` command shares: the settings and one Broker per invocation.

The app's callback puts an `Edge` in typer's context; nothing is read or opened until a
command asks, so `broker --help` and the commands that only read files open no database
(and run no migrations), and a command that does opens it once, however many parts use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from broker.settings import Settings

if TYPE_CHECKING:
    from broker.app import Broker


class Edge:
    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._broker: Broker | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings()
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


def edge(ctx: typer.Context) -> Edge:
    """The Edge the app's callback made (`ensure_object` makes one for a command run on its own)."""
    return ctx.ensure_object(Edge)
