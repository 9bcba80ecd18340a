"""`broker sites import FILE`: add or update private and edge sites (exit 2 on an invalid file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.failures import print_invalid
from broker.errors import InvalidRequest


def register(app: typer.Typer) -> None:
    sites_app = typer.Typer(help="Private data centres and edge sites.", no_args_is_help=True)
    app.add_typer(sites_app, name="sites")

    @sites_app.command("import")
    def import_(ctx: typer.Context, file: Annotated[Path, typer.Argument(help="sites YAML or JSON file")]) -> None:
        """Add or update private and edge sites; nothing changes when the file is invalid."""
        from broker.catalog.private_sites import import_sites, read_sites_file

        try:
            doc = read_sites_file(file)
        except InvalidRequest as exc:
            print_invalid(exc, "sites file")
            raise typer.Exit(EXIT_INVALID) from exc
        result = import_sites(edge(ctx).broker().sessions, doc)
        table = Table("pool", "USD/node-hour", "max_nodes", title=f"imported {len(result['sites'])} site(s)")
        for site in result["sites"]:
            for p in site["pools"]:
                table.add_row(p["id"], f"{p['price_per_hour']:.4f}", str(p["max_nodes"]))
        Console().print(table)
