"""`broker apikey create`, `broker budget set|show`, `broker quota set|import|show`, `broker worker`: running
the broker as a service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.failures import exits_on_error
from broker.cli.options import Tenant, at_least
from broker.errors import InvalidRequest


def register(app: typer.Typer) -> None:
    out, err = Console(), Console(stderr=True)
    apikey_app = typer.Typer(help="API keys (tenants and roles).", no_args_is_help=True)
    budget_app = typer.Typer(help="Monthly budgets per tenant or team.", no_args_is_help=True)
    app.add_typer(apikey_app, name="apikey")
    app.add_typer(budget_app, name="budget")
    quota_app = typer.Typer(help="vCPU quotas per provider quota group (aws:Inf, azure:ndasrv4).", no_args_is_help=True)
    app.add_typer(quota_app, name="quota")

    @quota_app.command("set")
    def quota_set(
        ctx: typer.Context,
        tenant: Tenant,
        group: Annotated[str, typer.Option("--group", help="a quota group: aws:Inf, aws:G and VT, azure:ndasrv4")],
        vcpus: Annotated[float, typer.Option(callback=at_least(0), help="vCPUs the tenant can run there (0: none)")],
    ) -> None:
        """Set a family quota; placements keep within it (docs/solver.md, "Node classes")."""
        from broker.placements.family_quotas import FamilyQuotas, quota_groups

        with exits_on_error(EXIT_INVALID):
            broker = edge(ctx).broker()
            got = FamilyQuotas(broker.sessions).set(
                tenant=tenant, quota_group=group, vcpus=vcpus, known=quota_groups(broker.catalog().table)
            )
        print(json.dumps(got, indent=2))

    @quota_app.command("import")
    def quota_import(
        ctx: typer.Context,
        file: Annotated[Path, typer.Argument(help="CSV quota_group,vcpus (e.g. from the providers' quota consoles)")],
        tenant: Tenant,
    ) -> None:
        """Set every quota of a file, all or nothing."""
        from broker.placements.family_quotas import FamilyQuotas, quota_groups

        with exits_on_error(EXIT_INVALID):
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidRequest(f"cannot read {file}: {exc}") from exc
            broker = edge(ctx).broker()
            n = FamilyQuotas(broker.sessions).import_csv(
                tenant=tenant, text=text, known=quota_groups(broker.catalog().table)
            )
        out.print(f"set {n} quota(s) for tenant {tenant}")

    @quota_app.command("show")
    def quota_show(ctx: typer.Context, tenant: Tenant) -> None:
        """The tenant's family quotas."""
        from broker.placements.family_quotas import FamilyQuotas

        print(json.dumps(FamilyQuotas(edge(ctx).broker().sessions).for_tenant(tenant), indent=2))

    @apikey_app.command("create")
    def apikey_create(
        ctx: typer.Context,
        tenant: Tenant,
        role: Annotated[str, typer.Option(help="viewer | planner | admin")],
        name: Annotated[str, typer.Option(help="a label for the key")] = "",
    ) -> None:
        """Print a new API key on the last line (it is stored hashed and never shown again)."""
        from broker.access.keys import KeyStore, parse_role

        with exits_on_error(EXIT_INVALID):
            desc, key = KeyStore(edge(ctx).broker().sessions).create(tenant=tenant, role=parse_role(role), name=name)
        err.print(f"key {desc['id']} for tenant {desc['tenant']} ({desc['role']}); store it now:")
        print(key)

    @apikey_app.command("list")
    def apikey_list(ctx: typer.Context, tenant: Tenant) -> None:
        """The tenant's keys (never the keys themselves)."""
        from broker.access.keys import KeyStore

        print(json.dumps(KeyStore(edge(ctx).broker().sessions).list_keys(tenant=tenant), indent=2))

    @apikey_app.command("revoke")
    def apikey_revoke(ctx: typer.Context, key_id: str, tenant: Tenant) -> None:
        from broker.access.keys import KeyStore

        with exits_on_error(EXIT_FAILED):
            KeyStore(edge(ctx).broker().sessions).revoke(key_id, tenant=tenant)
        out.print(f"revoked {key_id}")

    @budget_app.command("set")
    def budget_set(
        ctx: typer.Context,
        tenant: Tenant,
        monthly_usd: Annotated[float, typer.Option(callback=at_least(0), help="monthly budget in USD")],
        team: Annotated[str, typer.Option(help="team label; omitted: the whole tenant")] = "",
    ) -> None:
        """Set a monthly budget; placements that would exceed it are refused (CLI exit 4)."""
        from broker.placements.budgets import Budgets

        with exits_on_error(EXIT_INVALID):
            figures = Budgets(edge(ctx).broker().sessions).set(tenant=tenant, team=team, monthly_usd=monthly_usd)
        print(json.dumps(figures, indent=2))

    @budget_app.command("show")
    def budget_show(ctx: typer.Context, tenant: Tenant) -> None:
        """Budgets of a tenant with what is committed against them."""
        from broker.placements.budgets import Budgets

        print(json.dumps(Budgets(edge(ctx).broker().sessions).report(tenant=tenant), indent=2))

    @app.command()
    def migrate(
        ctx: typer.Context,
        revision: Annotated[
            str | None,
            typer.Option(help="go to this schema revision (e.g. 0010) instead of the newest; a downgrade drops data"),
        ] = None,
        confirm_downgrade: Annotated[
            bool,
            typer.Option(
                "--confirm-downgrade", help="really downgrade: the data of what the undone migrations add is lost"
            ),
        ] = False,
    ) -> None:
        """Migrate the database to the newest schema and load the catalog if it is empty; with
        --revision, to that revision (docs/operations.md, "Backup, restore and rollback")."""
        if revision is None:
            cat = edge(ctx).broker().catalog()
            err.print(f"database ready: catalog {cat.version[:8]}, {cat.table.n_pools} pools")
            return
        from alembic.util import CommandError

        from broker.db.session import downgrade, downgrade_steps, migrate

        url = edge(ctx).settings.database_url
        try:
            undone = downgrade_steps(url, revision)
            if not undone:
                migrate(url, revision)
                err.print(f"database at revision {revision} (nothing undone)")
                return
        except CommandError as exc:
            err.print(f"[red]invalid --revision:[/red] {exc}")
            raise typer.Exit(EXIT_INVALID) from exc
        err.print(f"downgrading to {revision} undoes {len(undone)} migration(s), newest first:")
        for rev, what in undone:
            err.print(f"  {rev}  {what}")
        err.print(
            "The tables and columns they added are dropped with their data (simulations, newer fields "
            "of stored placements, ...); upgrading again does not bring it back. Back up first."
        )
        if not confirm_downgrade:
            err.print("[red]not downgraded:[/red] add --confirm-downgrade to go ahead")
            raise typer.Exit(EXIT_INVALID)
        downgrade(url, revision)
        err.print(f"database at revision {revision}; a newer broker upgrades it again when it starts")

    @app.command()
    def worker(
        ctx: typer.Context,
        burst: Annotated[bool, typer.Option(help="stop when no job is left")] = False,
        check: Annotated[
            bool,
            typer.Option(
                "--check",
                help="run no jobs: exit 0 if a worker on this host has a live heartbeat in Redis, else 1 "
                "(a container healthcheck)",
            ),
        ] = False,
    ) -> None:
        """Run queued jobs: from Redis when BROKER_REDIS_URL is set, else from the database."""
        from broker.jobs.worker import serve
        from broker.observability import configure_logging

        settings = edge(ctx).settings
        if check:
            from broker.jobs.worker import check as check_worker

            if not settings.redis_url:
                err.print("worker --check reads the workers' heartbeats in Redis: set BROKER_REDIS_URL")
                raise typer.Exit(EXIT_INVALID)
            alive, what = check_worker(settings)
            (print if alive else err.print)(what)
            raise typer.Exit(0 if alive else EXIT_FAILED)
        configure_logging(settings.log_format)
        where = f"Redis queue {settings.queue_name!r}" if settings.redis_url else "the database"
        err.print(f"worker: running jobs from {where}")
        serve(edge(ctx).broker(), burst=burst)
