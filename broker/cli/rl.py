"""`broker rl train` / `broker rl evaluate`: the learned scheduler (docs/simulate.md, "The learned scheduler")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.failures import print_invalid, writing
from broker.cli.options import at_least
from broker.errors import BrokerError, InvalidRequest

rl_app = typer.Typer(help="The learned (PPO) placement policy over the fleet simulator.", no_args_is_help=True)
err = Console(stderr=True)
EVALUATED = "kube-default,karpenter-like,broker,ppo,broker+ppo"


def _days_list(value: str, option: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"comma-separated whole numbers, not {value!r}", param_hint=option) from exc
    if not out or min(out) < 0:
        raise typer.BadParameter("at least one, none negative", param_hint=option)
    return out


def register(app: typer.Typer) -> None:
    app.add_typer(rl_app, name="rl")


@rl_app.command("train")
def train(
    fleet: Annotated[Path, typer.Argument(help="fleet file (YAML or JSON), see docs/simulate.md")],
    out: Annotated[Path, typer.Option(help="folder the policy is saved in (ppo-v<N>.npz/.json/.png)")] = Path(
        "rl-models"
    ),
    timesteps: Annotated[int, typer.Option(min=1, help="decisions to train on")] = 200_000,
    seed: Annotated[int, typer.Option(help="training seed (episodes, network)")] = 0,
    days: Annotated[
        float, typer.Option(callback=at_least(1 / 288, "one 5-minute step"), help="days one episode replays")
    ] = 2.0,
    start_days: Annotated[str, typer.Option(help="training days an episode may start on")] = "1,2,3,4,5",
    validation_day: Annotated[int, typer.Option(min=0, help="start day of the learning curve's episode")] = 5,
    eval_every: Annotated[int, typer.Option(min=1, help="decisions between learning-curve points")] = 20_000,
) -> None:
    """Train a PPO placement policy (needs the rl extra). Exit codes: 0 saved, 1 the rl extra is
    missing or training failed, 2 invalid input."""
    from broker.simulate.fleet import parse_fleet
    from broker.simulate.load import read_document, snapshot_parts, traces
    from broker.simulate.market import build_market
    from broker.simulate.rl.train import MissingExtra, TrainConfig, require_extra
    from broker.simulate.rl.train import train as run_training
    from broker.simulate.usage import build_usage

    starts = _days_list(start_days, "--start-days")
    config = TrainConfig(
        timesteps=timesteps,
        seed=seed,
        days=days,
        start_days=starts,
        validation_start_day=validation_day,
        eval_every=eval_every,
    )
    try:
        require_extra()
    except MissingExtra as exc:
        err.print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from exc
    with writing(out, "--out"):
        out.mkdir(parents=True, exist_ok=True)
    try:
        doc = parse_fleet(read_document(fleet))
        with err.status("loading the catalog snapshot and traces..."):
            market = build_market(doc, snapshot_parts(doc.sites))
            usage = traces(doc.traces, fleet.parent)
        for day in sorted({*starts, validation_day}):  # every episode's days exist in the traces
            build_usage(doc.model_copy(update={"start_day": day}), usage, days=days)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=err) as bar:
            task = bar.add_task("training", total=timesteps)

            def tick(done: int, total: int, point: dict[str, float] | None) -> None:
                bar.update(task, completed=min(done, total))
                if point is not None:
                    bar.console.print(
                        f"{int(point['timesteps']):>8} decisions: validation spend ${point['spend_usd']:,.2f}, "
                        f"unavailable {point['unavailable_replica_min']:,.1f} replica-min, "
                        f"starved {point['starved_core_min']:,.1f} core-min, return {point['return']:,.2f}"
                    )

            path, card = run_training(doc, market, usage, config, out, progress=tick)
    except InvalidRequest as exc:
        print_invalid(exc, "training")
        raise typer.Exit(EXIT_INVALID) from exc
    except BrokerError as exc:
        err.print(f"[red]{exc.title}: {escape(exc.detail)}[/red]")
        raise typer.Exit(EXIT_FAILED) from exc
    err.print(
        f"saved {path} (card {path.with_suffix('.json').name}, curve {path.with_suffix('.png').name}): "
        f"{card['timesteps']} decisions in {card['wall_s']:.0f} s wall, {card['cpu_s']:.0f} s CPU"
    )


@rl_app.command("evaluate")
def evaluate(
    fleet: Annotated[Path, typer.Argument(help="fleet file (YAML or JSON), see docs/simulate.md")],
    model: Annotated[
        Path | None, typer.Option(help="a saved policy (.npz) or a folder of them (its newest); default: shipped")
    ] = None,
    policies: Annotated[str, typer.Option(help="comma-separated policies to compare")] = EVALUATED,
    seeds: Annotated[str, typer.Option(help="comma-separated scenario seeds")] = "7,1,2,3",
    start_day: Annotated[
        int | None, typer.Option(min=0, help="first simulated day (default: the fleet's start_day)")
    ] = None,
    days: Annotated[
        float | None,
        typer.Option(callback=at_least(1 / 288, "one 5-minute step"), help="days to simulate (default: the fleet's)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="the summary rows as JSON on stdout")] = False,
) -> None:
    """Replay the fleet under each policy for each seed, on days the policy was not trained on.
    Exit codes: 0 done, 2 invalid input (a day the policy trained on is refused)."""
    from broker.cli.context import load_settings
    from broker.cli.simulate import summary_table
    from broker.simulate.fleet import parse_fleet
    from broker.simulate.load import read_document, snapshot_parts, traces
    from broker.simulate.metrics import summary_frame
    from broker.simulate.policies import register as register_policy
    from broker.simulate.rl.model import load
    from broker.simulate.rl.policy import BrokerPlusPPO, PPOPolicy
    from broker.simulate.run import run_simulation
    from broker.solver_runtime import solver_options

    seed_list = _days_list(seeds, "--seeds")
    names = [p.strip() for p in policies.split(",") if p.strip()]
    settings = load_settings()
    rows: list[dict[str, Any]] = []
    try:
        actor = load(model)
        path = model
        register_policy("ppo", lambda f, m: PPOPolicy(f, m, path))
        register_policy("broker+ppo", lambda f, m: BrokerPlusPPO(f, m, path))
        doc = parse_fleet(read_document(fleet))
        if start_day is not None:
            doc = doc.model_copy(update={"start_day": start_day})
        length = doc.days if days is None else days
        trained = actor.card.get("config", {})
        last = max(trained.get("start_days", [0]), default=0) + float(trained.get("days", 0))
        if doc.start_day < last:
            msg = f"day {doc.start_day} is within the policy's training days (before day {last:g}): evaluate later days"
            raise InvalidRequest(f"start_day: {msg}", errors=[{"loc": ["start_day"], "msg": msg}])
        with err.status("loading the catalog snapshot and traces..."):
            parts = snapshot_parts(doc.sites)
            usage = traces(doc.traces, fleet.parent)
        for s in seed_list:
            with err.status(f"seed {s}: {', '.join(names)}..."):
                sim = run_simulation(
                    doc,
                    parts,
                    usage,
                    policies=names,
                    days=length,
                    seed=s,
                    solver_options=solver_options(settings),
                    overhead=settings.node_overhead(),
                )
            frame = summary_frame(sim.runs)
            seed_rows = [{**r, "seed": s} for r in frame.to_dict("records")]
            rows += seed_rows
            if not as_json:
                title = f"{sim.fleet.name}: days {doc.start_day}-{doc.start_day + length:g}, seed {s}"
                Console().print(summary_table(seed_rows, title))
            for warning in sim.warnings:
                err.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
    except InvalidRequest as exc:
        print_invalid(exc, "evaluation")
        raise typer.Exit(EXIT_INVALID) from exc
    except BrokerError as exc:
        err.print(f"[red]{exc.title}: {escape(exc.detail)}[/red]")
        raise typer.Exit(EXIT_FAILED) from exc
    if as_json:
        print(json.dumps({"model": actor.card.get("version"), "rows": rows}, indent=2, default=float))
