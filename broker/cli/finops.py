"""`broker finops ...`: savings ledger from the command line, and demo data for the dashboard."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.failures import print_invalid_options
from broker.cli.options import WindowFrom, WindowTo, api_time
from broker.errors import InvalidRequest


def register(app: typer.Typer) -> None:
    finops_app = typer.Typer(help="Savings ledger and dashboard data.", no_args_is_help=True)
    app.add_typer(finops_app, name="finops")

    @finops_app.command("savings")
    def savings(
        ctx: typer.Context,
        group_by: Annotated[
            str, typer.Option(help="provider, site, tenant, team, pool, name, workload or capacity_type")
        ] = "provider",
        tenant: Annotated[str | None, typer.Option(help="only this tenant's placements")] = None,
        start: WindowFrom = None,
        end: WindowTo = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the API's document")] = False,
    ) -> None:
        """Savings against the headline baseline (kubernetes-packer; the placement in force for a
        re-plan) over a window (the last 30 days unless --from/--to say otherwise, as GET /v1/savings),
        grouped; the greedy per-workload figure beside it."""
        from broker.finops.documents import SavingsOut
        from broker.finops.service import FinOps

        try:
            lo, hi = api_time(start, "--from"), api_time(end, "--to")
            report = FinOps(edge(ctx).broker()).savings(tenant=tenant, group_by=group_by, start=lo, end=hi)
        except InvalidRequest as exc:  # the API's checks on its query: from < to, years 1970-2200
            print_invalid_options(exc, {"group_by": "--group-by", "from": "--from", "to": "--to"})
            raise typer.Exit(EXIT_INVALID) from exc
        doc = SavingsOut.from_domain(report).model_dump(mode="json", by_alias=True)
        if as_json:
            print(json.dumps(doc, indent=2))
            return
        head, greedy = doc["baselines"][0]["policy"], doc["baselines"][-1]["policy"]
        t = Table(
            title=f"savings by {group_by} against {head}, {doc['from'][:10]} to {doc['to'][:10]} (USD)",
            caption=f"second figure: savings/month against {greedy}",
        )
        cols = ("group", "placements", "cost/h now", "baseline/h", "savings/month", "spent", "saved", "vs greedy/month")
        for col in cols:
            t.add_column(col, justify="left" if col == "group" else "right")
        for g in [*doc["groups"], {"key": "total", **doc["totals"]}]:
            t.add_row(
                g["key"],
                str(g["placements"]),
                f"{g['cost_per_hour']:.4f}",
                f"{g['baseline_cost_per_hour']:.4f}",
                f"{g['savings_per_month']:,.2f}",
                f"{g['cost']:,.2f}",
                f"{g['savings']:,.2f}",
                f"{g['greedy_savings_per_month']:,.2f}",
            )
        Console().print(t)

    @finops_app.command("seed-demo")
    def seed_demo(
        ctx: typer.Context,
        days: Annotated[int, typer.Option(help="spread the placements over this many past days")] = 30,
        per_service: Annotated[int, typer.Option(help="placements stored per demo service")] = 8,
    ) -> None:
        """Store demo placements (three services of two tenants, solved for real) to try the dashboard."""
        from broker.finops.demo import seed_demo as seed

        ids = seed(edge(ctx).broker(), days=days, per_service=per_service)
        Console(stderr=True).print(f"stored {len(ids)} demo placements; open /dashboard")
