"""`broker forecast evaluate|train|models`: hold-out evaluation and versioned models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_INVALID
from broker.errors import BrokerError, InvalidRequest


def _scores_table(title: str, scores: dict[str, dict[str, float]]) -> Table:
    t = Table("forecaster", "MAE", "sMAPE %", "p95 coverage %", "MAE / seasonal-naive", title=title)
    sn = scores.get("seasonal_naive", {}).get("mae") or float("nan")
    for name, s in scores.items():
        t.add_row(name, f"{s['mae']:.4f}", f"{s['smape']:.2f}", f"{s['p95_coverage']:.1f}", f"{s['mae'] / sn:.3f}")
    return t


def register(app: typer.Typer) -> None:
    fc_app = typer.Typer(help="Demand forecasts (global XGBoost, p50/p95).", no_args_is_help=True)
    app.add_typer(fc_app, name="forecast")

    @fc_app.command("evaluate")
    def evaluate_cmd(
        history: Annotated[Path, typer.Option(help="long CSV: series_id,timestamp,value[,metric]")],
        horizon: Annotated[int, typer.Option(help="points held out at the end of every series")] = 288,
        predictions_out: Annotated[Path | None, typer.Option(help="write series_id,timestamp,p50,p95")] = None,
        metric: Annotated[str | None, typer.Option(help="metric to use when the file has several")] = None,
        rounds: Annotated[int, typer.Option(help="boosting rounds")] = 60,
    ) -> None:
        """Hold out the last N points of each series, train on the rest, score model and baselines."""
        from broker.cli.failures import print_invalid
        from broker.forecast.evaluate import evaluate, predictions_frame
        from broker.forecast.history import HistoryError, parse_long_frame, regularize
        from broker.forecast.model import TrainParams
        from broker.usage.service import read_csv

        out, err = Console(), Console(stderr=True)
        try:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err) as bar:
                task = bar.add_task(f"reading {history}")
                frame, numeric = parse_long_frame(read_csv(history), metric=metric)
                panel = regularize(frame, numeric_time=numeric)
                if horizon < 1:
                    raise HistoryError("--horizon must be at least 1", [{"loc": ["horizon"], "msg": "< 1"}])
                ev = evaluate(
                    panel,
                    horizon=horizon,
                    params=TrainParams(rounds=rounds),
                    progress=lambda msg: bar.update(task, description=msg),
                )
                bar.update(task, description="done")
        except HistoryError as exc:
            print_invalid(InvalidRequest(exc.detail, errors=exc.errors), "history")
            raise typer.Exit(EXIT_INVALID) from exc
        except InvalidRequest as exc:
            print_invalid(exc, "history")
            raise typer.Exit(EXIT_INVALID) from exc
        for w in panel.warnings:
            err.print(f"[yellow]note:[/yellow] {w}")
        if ev.fallbacks:
            err.print(f"[yellow]note:[/yellow] {len(ev.fallbacks)} series with too little history use last_value")
        title = (
            f"{len(panel)} series, last {horizon} points held out, "
            f"{ev.model.train_rows:,} training rows in {ev.model.train_seconds:.1f}s"
        )
        out.print(_scores_table(title, {n: vars(s) for n, s in ev.scores.items()}))
        if predictions_out is not None:
            history_panel, _ = panel.split(horizon)
            predictions_frame(panel, ev.forecasts, horizon).to_csv(predictions_out, index=False)
            out.print(f"wrote {len(history_panel) * horizon} predictions to {predictions_out}")

    @fc_app.command("train")
    def train_cmd(
        ctx: typer.Context,
        metric: Annotated[str, typer.Option(help="cpu or memory_gib")] = "cpu",
        horizon: Annotated[int, typer.Option(help="steps ahead (5 min each)")] = 288,
        rounds: Annotated[int, typer.Option(help="boosting rounds")] = 60,
    ) -> None:
        """Train a new model version on all stored usage of a metric (scored on a hold-out first)."""
        from broker.forecast.model import TrainParams
        from broker.usage.service import UsageStore

        out, err = Console(), Console(stderr=True)
        store = UsageStore(edge(ctx).broker().sessions)
        try:
            with err.status("training...") as status:
                summary = store.train(
                    metric=metric,
                    horizon=horizon,
                    params=TrainParams(rounds=rounds),
                    progress=lambda m: status.update(m),
                )
        except BrokerError as exc:
            err.print(f"[red]{exc.title}: {exc.detail}[/red]")
            raise typer.Exit(EXIT_INVALID if isinstance(exc, InvalidRequest) else 1) from exc
        out.print(_scores_table(f"model v{summary['version']} ({metric})", summary["metrics"]))

    @fc_app.command("models")
    def models_cmd(ctx: typer.Context) -> None:
        """List stored model versions with their hold-out metrics."""
        from broker.usage.service import UsageStore

        t = Table("version", "created", "metric", "series", "rows", "MAE", "MAE / seasonal-naive", "p95 cov %")
        for m in UsageStore(edge(ctx).broker().sessions).list_models():
            x, sn = m["metrics"].get("xgboost", {}), m["metrics"].get("seasonal_naive", {})
            ratio = x.get("mae", 0) / sn["mae"] if sn.get("mae") else float("nan")
            t.add_row(
                str(m["version"]),
                str(m["created_at"])[:19],
                m["metric"],
                str(m["n_series"]),
                str(m["train_rows"]),
                f"{x.get('mae', float('nan')):.4f}",
                f"{ratio:.3f}",
                f"{x.get('p95_coverage', float('nan')):.1f}",
            )
        Console().print(t)
