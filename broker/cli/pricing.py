"""`broker pricing refresh|status|discount`: live price feeds and negotiated rates."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.options import at_least
from broker.errors import InvalidRequest


def register(app: typer.Typer) -> None:
    pricing_app = typer.Typer(help="Live price feeds, discounts and price history.", no_args_is_help=True)
    app.add_typer(pricing_app, name="pricing")

    @pricing_app.command("refresh")
    def refresh_cmd(
        ctx: typer.Context,
        provider: Annotated[str, typer.Option(help="aws | azure | gcp | all")] = "all",
        region: Annotated[list[str] | None, typer.Option(help="region code; repeat for several")] = None,
        endpoint: Annotated[
            str | None, typer.Option(help="base URL override (tests, proxies, sovereign clouds)")
        ] = None,
    ) -> None:
        """Fetch current prices; one transaction per provider, a failed provider keeps its old prices."""
        from broker.catalog.refresh import refresh

        out, err = Console(), Console(stderr=True)
        broker = edge(ctx).broker()
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
        ) as bar:
            task = bar.add_task("pricing", total=None)

            def progress(what: str, done: int, total: int) -> None:
                bar.update(task, description=what, completed=done, total=total)

            try:
                outcomes = refresh(
                    broker.sessions,
                    broker.settings,
                    provider=provider,
                    regions=region or None,
                    endpoint=endpoint,
                    progress=progress,
                )
            except InvalidRequest as exc:
                err.print(f"[red]invalid:[/red] {exc.detail}")
                raise typer.Exit(EXIT_INVALID) from exc
        table = Table(
            "provider", "regions", "updated", "added", "unchanged", "storage", "result", title="price refresh"
        )
        for o in outcomes:
            table.add_row(
                o.provider,
                str(len(o.regions)),
                str(o.updated),
                str(o.added),
                str(o.unchanged),
                str(o.storage),
                "ok" if o.ok else "[red]failed[/red]",
            )
        out.print(table)
        for o in outcomes:
            if not o.ok:
                err.print(f"[red]{o.provider}: failed, old prices kept:[/red] {o.error}", soft_wrap=True)
        if any(not o.ok for o in outcomes):
            raise typer.Exit(EXIT_FAILED)

    @pricing_app.command("status")
    def status_cmd(ctx: typer.Context) -> None:
        """Newest price date per source; sources older than BROKER_PRICE_STALE_AFTER_DAYS are flagged."""
        from broker.catalog.prices import stale_sources

        broker = edge(ctx).broker()
        cat = broker.catalog()
        stale = stale_sources(cat.price_as_of, max_age_days=broker.settings.price_stale_after_days)
        table = Table("source", "prices as of", "stale")
        for source, as_of in sorted(cat.price_as_of.items()):
            table.add_row(source, as_of, "[yellow]stale[/yellow]" if source in stale else "")
        Console().print(table)

    @pricing_app.command("discount")
    def discount_cmd(
        ctx: typer.Context,
        provider: Annotated[str, typer.Option(help="aws | azure | gcp")],
        pct: Annotated[float, typer.Option(callback=at_least(0), help="discount in percent off the list price")],
        family: Annotated[str, typer.Option(help="glob on the instance type, e.g. 'm6i.*'")] = "*",
        region: Annotated[str, typer.Option(help="glob on the region, e.g. 'eu-*'")] = "*",
        capacity_type: Annotated[list[str] | None, typer.Option(help="ondemand | spot | reserved; repeat")] = None,
        note: Annotated[str, typer.Option(help="e.g. the agreement it comes from")] = "",
    ) -> None:
        """Add a negotiated discount rule and re-price the provider's pools."""
        from broker.catalog.prices import add_discount

        if provider not in ("aws", "azure", "gcp") or not 0 < pct < 100:
            Console(stderr=True).print("[red]invalid:[/red] --provider aws|azure|gcp and 0 < --pct < 100")
            raise typer.Exit(EXIT_INVALID)
        rule = add_discount(
            edge(ctx).broker().sessions,
            provider=provider,
            discount_pct=pct,
            family=family,
            region=region,
            capacity_types=capacity_type or [],
            note=note,
        )
        Console().print(f"discount rule {rule['id']} stored; {rule['repriced_pools']} pools re-priced")

    @pricing_app.command("commit")
    def commit_cmd(
        ctx: typer.Context,
        site: Annotated[str, typer.Option(help="e.g. aws:eu-central-1")],
        instance_type: Annotated[str, typer.Option(help="e.g. m6i.xlarge")],
        count: Annotated[int, typer.Option(help="nodes already bought (reserved instances, committed nodes)")],
        usd_per_hour: Annotated[
            float, typer.Option(callback=at_least(0), help="marginal price still paid per node-hour; 0 = sunk")
        ] = 0.0,
    ) -> None:
        """Record already-bought capacity; the solver fills it before buying anything."""
        from broker.catalog.prices import commit_capacity

        try:
            done = commit_capacity(
                edge(ctx).broker().sessions,
                site=site,
                instance_type=instance_type,
                count=count,
                usd_per_hour=usd_per_hour,
            )
        except InvalidRequest as exc:
            Console(stderr=True).print(f"[red]invalid:[/red] {exc.detail}")
            raise typer.Exit(EXIT_INVALID) from exc
        Console().print(f"{done['pool']}: {done['max_nodes']} committed nodes at {done['price_per_hour']:g} USD/h")
