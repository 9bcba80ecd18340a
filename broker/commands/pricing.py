"""`broker pricing ...` commands."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pricing_app = typer.Typer(help="Live price feeds, discounts and price history.", no_args_is_help=True)
    app.add_typer(pricing_app, name="pricing")
