"""`broker export focus`: the FinOps FOCUS 1.2 cost and usage export of stored placements."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.failures import print_invalid_options, writing
from broker.cli.options import WindowFrom, WindowTo, api_time
from broker.errors import InvalidRequest


class ExportFormat(StrEnum):
    csv = "csv"
    parquet = "parquet"


def register(app: typer.Typer) -> None:
    export_app = typer.Typer(help="Export cost data for FinOps tools.", no_args_is_help=True)
    app.add_typer(export_app, name="export")

    @export_app.command("focus")
    def focus(
        ctx: typer.Context,
        start: WindowFrom = None,
        end: WindowTo = None,
        fmt: Annotated[ExportFormat, typer.Option("--format", help="csv or parquet")] = ExportFormat.csv,
        output: Annotated[
            Path | None, typer.Option("-o", "--output", help="file to write (default: stdout for csv)")
        ] = None,
        tenant: Annotated[str | None, typer.Option(help="only this tenant's placements")] = None,
    ) -> None:
        """One FOCUS row per placement node pool (plus storage and egress) per UTC day."""
        from broker.finops.focus_io import to_csv, to_parquet
        from broker.finops.service import FinOps

        err = Console(stderr=True)
        try:
            lo, hi = api_time(start, "--from"), api_time(end, "--to")
            if fmt is ExportFormat.parquet and output is None:
                raise InvalidRequest(
                    "parquet is binary: give --output FILE", errors=[{"loc": ["--output"], "msg": "required"}]
                )
            rows = FinOps(edge(ctx).broker()).focus(tenant=tenant, start=lo, end=hi)
        except InvalidRequest as exc:  # the API's checks on its window: from < to, years 1970-2200, 366 days
            print_invalid_options(exc, {"from": "--from", "to": "--to", "--output": "--output"})
            raise typer.Exit(EXIT_INVALID) from exc
        body = to_parquet(rows) if fmt is ExportFormat.parquet else to_csv(rows)
        if output is None:
            sys.stdout.buffer.write(body)
            sys.stdout.flush()
        else:
            with writing(output, "--output"):
                output.write_bytes(body)
            err.print(f"wrote {len(rows)} FOCUS rows to {output}")

    @export_app.command("karpenter")
    def karpenter(
        ctx: typer.Context,
        provider: Annotated[str, typer.Option(help="aws or azure")] = "aws",
        commitments: Annotated[
            bool, typer.Option(help="also price committed capacity (every node of the type gets that price)")
        ] = False,
    ) -> None:
        """Karpenter NodeOverlays (YAML on stdout) carrying negotiated discounts and, with
        --commitments, committed capacity: `broker export karpenter | kubectl apply -f -`."""
        import yaml

        from broker.integrations.service import node_overlays

        err = Console(stderr=True)
        try:
            overlays, notes = node_overlays(edge(ctx).broker(), provider=provider, commitments=commitments)
        except InvalidRequest as exc:
            err.print(f"[red]invalid:[/red] {exc.detail}")
            raise typer.Exit(EXIT_INVALID) from exc
        for note in notes:
            err.print(f"skipped {note}")
        if overlays:
            sys.stdout.write(yaml.safe_dump_all(overlays, sort_keys=False))
            err.print(f"{len(overlays)} NodeOverlay objects")
        else:  # kubectl apply then says "no objects passed to apply": say why first
            err.print(
                f"0 NodeOverlay objects: no discount rule for {provider} produced one"
                + ("" if commitments else " (and --commitments was not given)")
                + "; add one with `broker pricing discount`"
            )
