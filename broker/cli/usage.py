"""`broker usage import|pull|show`: usage history in the store (exit 2 on invalid input, nothing stored)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.failures import err, exits_on_error, print_invalid
from broker.cli.options import Tenant, at_least
from broker.errors import InvalidRequest


def register(app: typer.Typer) -> None:
    usage_app = typer.Typer(help="Workload usage history (feeds demand forecasts).", no_args_is_help=True)
    app.add_typer(usage_app, name="usage")

    @usage_app.command("import")
    def import_(
        ctx: typer.Context,
        file: Annotated[Path, typer.Argument(help="long CSV: series_id,timestamp,value[,metric]")],
        series: Annotated[str | None, typer.Option(help="store every row under this series name")] = None,
        tenant: Tenant = "default",
    ) -> None:
        """Import usage samples; timestamps in Unix seconds or ISO 8601. A re-import replaces its window."""
        from broker.usage.service import UsageStore, read_csv

        out = Console()
        try:
            with err.status(f"reading {file}..."):
                frame = read_csv(file)
                summary = UsageStore(edge(ctx).broker().sessions).import_frame(frame, tenant=tenant, series=series)
        except InvalidRequest as exc:
            print_invalid(exc, "usage file")
            raise typer.Exit(EXIT_INVALID) from exc
        out.print(
            f"imported {summary.rows} samples of {len(summary.series)} series "
            f"(metrics: {', '.join(summary.metrics)}; replaced {summary.replaced})"
        )

    @usage_app.command("pull")
    def pull(
        ctx: typer.Context,
        prometheus: Annotated[str, typer.Option(help="Prometheus base URL, e.g. http://prom:9090")],
        query: Annotated[str, typer.Option(help="PromQL, e.g. sum(rate(container_cpu_usage_seconds_total[5m]))")],
        series: Annotated[str | None, typer.Option(help="store the single result series under this name")] = None,
        series_label: Annotated[str | None, typer.Option(help="name each result series by this label")] = None,
        metric: Annotated[str, typer.Option(help="cpu (cores) or memory_gib")] = "cpu",
        hours: Annotated[float, typer.Option(callback=at_least(0), help="how far back to pull")] = 14 * 24,
        step: Annotated[int, typer.Option(help="resolution in seconds")] = 300,
        end: Annotated[
            float | None, typer.Option(callback=at_least(0), help="end as Unix seconds (default: now)")
        ] = None,
        tenant: Tenant = "default",
    ) -> None:
        """Pull usage over the Prometheus HTTP API (query_range) and store it."""
        from broker.usage.service import UsageStore, fetch_prometheus, parse_query_range

        out = Console()
        stop = end if end is not None else time.time()
        try:
            with err.status(f"querying {prometheus}..."):
                doc = fetch_prometheus(prometheus, query, start=stop - hours * 3600, end=stop, step_s=step)
                frame = parse_query_range(doc, series_label=series_label, series=series).assign(metric=metric)
                summary = UsageStore(edge(ctx).broker().sessions).import_frame(frame, tenant=tenant)
        except InvalidRequest as exc:
            print_invalid(exc, "Prometheus answer")
            raise typer.Exit(EXIT_INVALID) from exc
        out.print(f"pulled {summary.rows} samples of {len(summary.series)} series: {', '.join(summary.series)}")

    @usage_app.command("show")
    def show(
        ctx: typer.Context, name: Annotated[str, typer.Argument(help="series name")], tenant: Tenant = "default"
    ) -> None:
        """What is stored for one series."""
        from broker.usage.service import UsageStore

        with exits_on_error(EXIT_FAILED):
            doc = UsageStore(edge(ctx).broker().sessions).series_summary(name, tenant=tenant)
        Console().print_json(data=doc)
