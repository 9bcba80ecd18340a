"""`broker simulate FLEET`: replay a fleet under several policies and compare them (docs/simulate.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.failures import exits_on_error, print_invalid, writing
from broker.cli.options import Tenant, at_least
from broker.errors import BrokerError, InvalidRequest

DEFAULT_POLICIES = "kube-default,cheapest-fit,karpenter-like,broker"
# broker.simulate.fleet.MIN_DAYS (a run replays one 5-minute step at least); not imported here,
# as the command loads the simulator only when it runs
ONE_STEP_DAYS = 300 / 86_400
SHOWN = (
    ("spend_usd", "spend $"),
    ("spend_per_hour_usd", "$/h"),
    ("cpu_utilisation", "cpu util"),
    ("memory_utilisation", "mem util"),
    ("starved_core_min", "starved core-min"),
    ("unavailable_replica_min", "unavail. replica-min"),
    ("slo_violation_replica_min", "SLO viol. replica-min"),
    ("spot_interruptions", "spot int."),
    ("migrations", "moves"),
    ("sched_latency_p50_s", "sched p50 s"),
    ("sched_latency_p99_s", "sched p99 s"),
    ("decision_p99_ms", "decide p99 ms"),
    ("fairness_jain", "Jain"),
)


def summary_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Figures as rows, policies as columns: four policies fit a terminal, fourteen figures do not."""
    table = Table("", *(str(r["policy"]) for r in rows), title=title)
    for key, label in SHOWN:
        table.add_row(label, *(_fmt(r[key]) for r in rows))
    return table


def _slowdown() -> float:
    """How much slower than idle a one-thread run goes now: the runnable processes (the 1-minute
    load) and this one sharing the cores. 1 where the load cannot be read."""
    import os

    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, (load + 1) / (os.cpu_count() or 1))


def _policy_names() -> set[str]:
    from broker.simulate.policies import POLICIES

    return set(POLICIES)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        return f"{v:,.4f}" if abs(v) <= 1 else f"{v:,.2f}"
    return str(v)


def register(app: typer.Typer) -> None:
    @app.command()
    def simulate(
        ctx: typer.Context,
        fleet: Annotated[Path, typer.Argument(help="fleet file (YAML or JSON), see docs/simulate.md")],
        days: Annotated[
            float | None,
            typer.Option(
                callback=at_least(ONE_STEP_DAYS, "one 5-minute step"),
                help="days to simulate, one 5-minute step (0.0035) at least (default: the fleet's `days`)",
            ),
        ] = None,
        policies: Annotated[str, typer.Option(help="comma-separated policies to compare")] = DEFAULT_POLICIES,
        seed: Annotated[int | None, typer.Option(help="random seed (default: the fleet's `seed`)")] = None,
        out: Annotated[
            Path | None, typer.Option(help="write summary, per-step series and events (CSV + Parquet)")
        ] = None,
        store: Annotated[
            bool,
            typer.Option(
                "--store",
                help="also store the run in the broker's database, as POST /v1/simulations stores its runs: "
                "GET /v1/simulations and /dashboard/simulations show it",
            ),
        ] = False,
        tenant: Tenant = "default",
    ) -> None:
        """Replay a fleet at 5-minute steps under each policy; says up front how long it should take
        and shows each policy's progress. Exit codes: 0 done, 1 failed, 2 invalid input."""
        from datetime import UTC, datetime

        from broker.simulate.estimate import estimate_run
        from broker.simulate.fleet import parse_fleet
        from broker.simulate.load import read_document, snapshot_parts, traces
        from broker.simulate.metrics import summary_frame
        from broker.simulate.run import run_simulation
        from broker.solver_runtime import solver_options

        err = Console(stderr=True)
        settings = edge(ctx).settings
        names = [p.strip() for p in policies.split(",") if p.strip()]
        if out is not None:  # a folder that cannot be made fails now, not after the whole run
            with writing(out, "--out"):
                out.mkdir(parents=True, exist_ok=True)
        try:
            raw = read_document(fleet)
            doc = parse_fleet(raw)
            if store:  # the database opened (migrated, the catalog loaded) now, not after the run
                with err.status("opening the broker's database (--store)..."):
                    edge(ctx).broker()
            with err.status("loading the catalog snapshot and traces..."):
                parts = snapshot_parts(doc.sites)
                usage = traces(doc.traces, fleet.parent)
            # said once the whole input is checked (run_simulation validates it all first), before
            # the first replay starts
            estimate = estimate_run(doc, names, doc.days if days is None else days).describe(_slowdown())
            known = [n for n in dict.fromkeys(names) if n in _policy_names()]
            started = datetime.now(UTC)
            columns = (
                TextColumn("{task.description:<15}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
            )
            with Progress(*columns, console=err) as bar:
                # every policy's bar from the start, each clock started when its replay does
                tasks: dict[str, Any] = {}

                def tick(policy: str, done: int, total: int) -> None:
                    if not tasks:
                        bar.console.print(f"replaying {escape(estimate)}", soft_wrap=True)
                        tasks.update({n: bar.add_task(n, total=None, start=False) for n in known})
                    if policy not in tasks:
                        tasks[policy] = bar.add_task(policy, total=total)
                    task = tasks[policy]
                    if done == 0:  # its opening placement begins (the broker's can be its longest step)
                        bar.start_task(task)
                        bar.update(task, total=total, completed=0, description=f"{policy} (opening)")
                    elif done == 1 or done % 12 == 0 or done == total:
                        bar.update(task, total=total, completed=done, description=policy)

                sim = run_simulation(
                    doc,
                    parts,
                    usage,
                    policies=names,
                    days=days,
                    seed=seed,
                    progress=tick,
                    solver_options=solver_options(settings),
                    overhead=settings.node_overhead(),
                )
        except InvalidRequest as exc:
            print_invalid(exc, "fleet")
            raise typer.Exit(EXIT_INVALID) from exc
        except BrokerError as exc:
            err.print(f"[red]{exc.title}: {exc.detail}[/red]")
            raise typer.Exit(EXIT_FAILED) from exc
        frame = summary_frame(sim.runs)
        title = f"{sim.fleet.name}: {sim.days:g} days, seed {sim.fleet.seed}"
        Console().print(summary_table(frame.to_dict("records"), title))
        for warning in sim.warnings:  # figures to doubt: said after them, where they are read
            err.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
        if out is not None:
            from broker.simulate.output import write_results

            with writing(out, "--out"):
                written = write_results(sim, out)
            for path in written:
                err.print(f"wrote {path}")
        if store:
            from broker.jobs.simulations import SimulationService

            with exits_on_error(EXIT_FAILED):
                stored = SimulationService(edge(ctx).broker()).store_finished(
                    sim, raw, tenant=tenant, policies=names, started_at=started
                )
            err.print(f"stored as {stored['id']}: GET /v1/simulations/{stored['id']}, /dashboard/simulations")
