"""`broker forecast evaluate|train|models`: hold-out evaluation and versioned models."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.failures import writing
from broker.cli.options import Tenant
from broker.errors import BrokerError, InvalidRequest

if TYPE_CHECKING:  # pandas and the forecast core load when a forecast command runs, not on every start
    import pandas as pd

    from broker.forecast.evaluate import Scores
    from broker.forecast.history import Panel


def _scores_table(title: str, scores: dict[str, dict[str, float]]) -> Table:
    t = Table("forecaster", "MAE", "sMAPE %", "p95 coverage %", "MAE / seasonal-naive", title=title)
    sn = scores.get("seasonal_naive", {}).get("mae") or float("nan")
    for name, s in scores.items():
        t.add_row(name, f"{s['mae']:.4f}", f"{s['smape']:.2f}", f"{s['p95_coverage']:.1f}", f"{s['mae'] / sn:.3f}")
    return t


def _metrics(raw: pd.DataFrame) -> list[str | None]:
    """Each metric of a long file in turn (None: the file has no metric column, i.e. cpu)."""
    if "metric" not in raw.columns:
        return [None]
    names = raw["metric"].fillna("cpu").astype(str).str.strip().replace("", "cpu")
    return sorted(names.unique().tolist())


def _progress(err: Console) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err)


def _evaluate_metric(
    panel: Panel, horizon: int, days: int, rounds: int, label: str, out: Console, err: Console
) -> pd.DataFrame:
    """Score one metric's panel and print the tables; return the last horizon's selected predictions."""
    from broker.forecast.evaluate import evaluate, predictions_frame
    from broker.forecast.model import TrainParams
    from broker.forecast.rolling import rolling_origin
    from broker.forecast.select import SelectParams

    params = TrainParams(rounds=rounds)
    with _progress(err) as bar:
        task = bar.add_task("evaluating")
        report = lambda msg: bar.update(task, description=f"{label}{msg}")  # noqa: E731
        if days:
            ev = rolling_origin(panel, days=days, horizon=horizon, params=params, progress=report)
        else:
            single = evaluate(panel, horizon=horizon, params=params, select=SelectParams(), progress=report)
    if not days:
        if single.fallbacks:
            n = len(single.fallbacks)
            err.print(f"[yellow]note:[/yellow] {label}{n} series with too little history use last_value")
        title = (
            f"{label}{len(panel)} series, last {horizon} points held out, "
            f"{single.model.train_rows:,} training rows in {single.model.train_seconds:.1f}s"
        )
        out.print(_scores_table(title, {n: vars(s) for n, s in single.scores.items()}))
        _print_summary(out, label, single.scores, [])
        return predictions_frame(panel, single.selected, horizon)
    for d in ev.days:
        shifted = f", {d.regime_shifts} regime shift(s)" if d.regime_shifts else ""
        title = f"{label}day -{d.back} ({len(panel)} series; chosen: {d.fleet}{shifted})"
        out.print(_scores_table(title, {n: vars(s) for n, s in d.scores.items()}))
    out.print(_scores_table(f"{label}all {days} days pooled", {n: vars(s) for n, s in ev.pooled.items()}))
    _print_summary(out, label, ev.pooled, [ev.ratio("selected", day=d) for d in ev.days])
    return predictions_frame(panel, ev.last, horizon)


def _print_summary(out: Console, label: str, scores: dict[str, Scores], per_day: list[float]) -> None:
    """The selected forecaster against seasonal-naive and against the fixed rule the table just
    printed shows best (lowest MAE), then its p95 coverage against what it promises."""
    from broker.forecast.evaluate import best_fixed_rule, coverage_note
    from broker.forecast.rolling import FIXED_RULES

    if "selected" not in scores:
        return
    best = best_fixed_rule(scores, FIXED_RULES)

    def ratio(to: str) -> float:
        return scores["selected"].mae / scores[to].mae if scores[to].mae else float("nan")

    days = f"per day {', '.join(f'{r:.3f}' for r in per_day)}; pooled " if per_day else ""
    out.print(
        f"{label}selected MAE / seasonal-naive: {days}{ratio('seasonal_naive'):.3f}; "
        f"/ {best} (the best fixed rule above, MAE {scores[best].mae:.4f}): {ratio(best):.3f}"
        + (" (the selected forecaster is worse than this rule here)" if ratio(best) > 1 else ""),
        soft_wrap=True,
    )
    out.print(f"{label}{coverage_note(scores['selected'].p95_coverage)}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    fc_app = typer.Typer(help="Demand forecasts (global XGBoost, p50/p95).", no_args_is_help=True)
    app.add_typer(fc_app, name="forecast")

    @fc_app.command("evaluate")
    def evaluate_cmd(
        history: Annotated[Path, typer.Option(help="long CSV: series_id,timestamp,value[,metric]")],
        horizon: Annotated[int, typer.Option(help="points held out at the end of every series")] = 288,
        predictions_out: Annotated[Path | None, typer.Option(help="write series_id,timestamp,p50,p95")] = None,
        metric: Annotated[str | None, typer.Option(help="one metric of the file (default: each in turn)")] = None,
        rounds: Annotated[int, typer.Option(help="boosting rounds")] = 60,
        days: Annotated[
            int, typer.Option(help="rolling origin: hold out each of the last K horizons in turn (0 = the last only)")
        ] = 0,
    ) -> None:
        """Hold out the last N points of each series, train on the rest, score the selected forecaster,
        the model and the baselines; with --days K, per held-out day and pooled over the K days."""
        from broker.cli.failures import print_invalid
        from broker.forecast.history import HistoryError, parse_long_frame, regularize
        from broker.usage.service import read_csv

        out, err = Console(), Console(stderr=True)
        predictions: list[pd.DataFrame] = []
        try:
            raw = read_csv(history)
            metrics = [metric] if metric else _metrics(raw)
            for m in metrics:
                frame, numeric = parse_long_frame(raw, metric=m)
                panel = regularize(frame, numeric_time=numeric)
                if horizon < 1 or days < 0:
                    bad = "horizon" if horizon < 1 else "days"
                    raise HistoryError("--horizon must be >= 1, --days >= 0", [{"loc": [bad], "msg": "too small"}])
                label = f"{m or 'cpu'}: " if len(metrics) > 1 else ""
                for w in panel.warnings:
                    err.print(f"[yellow]note:[/yellow] {label}{w}")
                pred = _evaluate_metric(panel, horizon, days, rounds, label, out, err)
                predictions.append(pred.assign(metric=m) if len(metrics) > 1 else pred)
        except HistoryError as exc:
            print_invalid(InvalidRequest(exc.detail, errors=exc.errors), "history")
            raise typer.Exit(EXIT_INVALID) from exc
        except InvalidRequest as exc:
            print_invalid(exc, "history")
            raise typer.Exit(EXIT_INVALID) from exc
        if predictions_out is not None:
            import pandas as pd

            frame = pd.concat(predictions, ignore_index=True)
            with writing(predictions_out, "--predictions-out"):
                frame.to_csv(predictions_out, index=False)
            out.print(f"wrote {len(frame)} predictions to {predictions_out}")

    @fc_app.command("train")
    def train_cmd(
        ctx: typer.Context,
        metric: Annotated[str, typer.Option(help="cpu or memory_gib")] = "cpu",
        horizon: Annotated[int, typer.Option(help="steps ahead (5 min each)")] = 288,
        rounds: Annotated[int, typer.Option(help="boosting rounds")] = 60,
        tenant: Tenant = "default",
    ) -> None:
        """Train a new model version on a tenant's stored usage of a metric (scored on a hold-out
        first). It forecasts for that tenant only."""
        from broker.access.keys import check_tenant
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
                    tenant=check_tenant(tenant),
                    progress=lambda m: status.update(m),
                )
        except BrokerError as exc:
            err.print(f"[red]{exc.title}: {exc.detail}[/red]")
            raise typer.Exit(EXIT_INVALID if isinstance(exc, InvalidRequest) else 1) from exc
        out.print(_scores_table(f"model v{summary['version']} ({metric})", summary["metrics"]))

    @fc_app.command("models")
    def models_cmd(
        ctx: typer.Context,
        tenant: Tenant = "default",
    ) -> None:
        """List a tenant's stored model versions with their hold-out metrics."""
        from broker.access.keys import check_tenant
        from broker.usage.service import UsageStore

        t = Table("version", "created", "metric", "series", "rows", "MAE", "MAE / seasonal-naive", "p95 cov %")
        try:
            models = UsageStore(edge(ctx).broker().sessions).list_models(tenant=check_tenant(tenant))
        except InvalidRequest as exc:
            Console(stderr=True).print(f"[red]{exc.title}: {exc.detail}[/red]")
            raise typer.Exit(EXIT_INVALID) from exc
        for m in models:
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
