"""`broker latency import`, `matrix` (round-trip times of many pairs) and `evaluate` (held-out
accuracy of the latency model) (docs/latency.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.failures import print_invalid
from broker.cli.options import Tenant


def _sites() -> dict[str, Any]:
    from broker.core.domain import Site, SiteKind
    from pricing import snapshot

    out = {}
    for s in snapshot.read_sites():
        sid, kind = s["id"], SiteKind(s["kind"])
        out[sid] = Site(sid, s["provider"], kind, s["region"], s["country"], s["jurisdictions"], s["lat"], s["lon"])
    return out


def _rows(file: Path | None) -> list[dict[str, Any]]:
    """Measured rows of the bundled snapshot, or of a CSV with ``src,dst,rtt_ms[,rtt_p95_ms]``."""
    import pandas as pd

    from broker.errors import InvalidRequest
    from pricing import snapshot

    if file is None:
        return list(snapshot.read_latency().to_dict("records"))
    try:
        df = pd.read_csv(file, dtype={"src": str, "dst": str})
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"cannot read {file}: {exc}", errors=[{"loc": ["file"], "msg": str(exc)}]) from exc
    missing = [c for c in ("src", "dst", "rtt_ms") if c not in df.columns]
    if missing:
        errors = [{"loc": ["file", c], "msg": "missing"} for c in missing]
        raise InvalidRequest(f"{file} lacks column(s) {', '.join(missing)}", errors=errors)
    for col in ("rtt_ms", "rtt_p95_ms"):
        if col in df.columns and not pd.api.types.is_numeric_dtype(df[col]):
            errors = [{"loc": ["file", col], "msg": "not a number"}]
            raise InvalidRequest(f"{file}: {col} must be numbers", errors=errors)
    return list(df.to_dict("records"))


def _table(evaluations: list[Any]) -> Table:
    t = Table(
        "held out",
        "setting",
        "pairs",
        "median |error| %",
        "median error %",
        "underestimated %",
        "overestimated >50 %",
        title="latency model, held-out accuracy (estimate vs measured value of the same statistic)",
    )
    for ev in evaluations:
        for q, s in ev.scores.items():
            t.add_row(
                ev.scheme,
                q,
                str(s.n),
                f"{s.median_ape_pct:.1f}",
                f"{s.median_error_pct:+.1f}",
                f"{s.underestimated_pct:.1f}",
                f"{s.overestimated_50_pct:.1f}",
            )
    return t


def _print_matrix(doc: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(doc, indent=2))
        return
    if fmt == "csv":
        import csv
        import sys

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["from", "to", "quantile", "rtt_ms", "source", "method"])
        for i in doc["items"]:
            w.writerow(
                [
                    i["from"],
                    i["to"],
                    i["quantile"],
                    "" if i["rtt_ms"] is None else i["rtt_ms"],
                    i["source"] or "",
                    i["method"] or "",
                ]
            )
        return
    t = Table("from", *doc["to"], title=f"round-trip time, ms ({doc['quantile']})")
    cells: dict[tuple[str, str], str] = {
        (i["from"], i["to"]): "-" if i["rtt_ms"] is None else f"{i['rtt_ms']:.1f}" for i in doc["items"]
    }
    for src in doc["from"]:
        t.add_row(src, *(cells[(src, dst)] for dst in doc["to"]))
    Console().print(t)


def register(app: typer.Typer) -> None:
    lat_app = typer.Typer(help="The latency model: measured and estimated round-trip times.", no_args_is_help=True)
    app.add_typer(lat_app, name="latency")

    @lat_app.command("import")
    def import_cmd(
        ctx: typer.Context,
        file: Annotated[Path, typer.Argument(help="CSV from,to,rtt_ms[,statistic][,source]")],
        tenant: Tenant = "default",
    ) -> None:
        """Store your own RTT measurements; they win over the catalog's figures (docs/latency.md).
        `to` may be a site, geo:lat,lon or the name of a user region. All or nothing."""
        from broker.catalog.latency_measurements import MeasurementStore, read_measurements_csv
        from broker.errors import InvalidRequest

        out, err = Console(), Console(stderr=True)
        try:
            rows = read_measurements_csv(file)
            broker = edge(ctx).broker()
            with err.status(f"importing {file}..."):
                summary = MeasurementStore(broker.sessions).import_rows(
                    rows, sites=broker.catalog().sites, tenant=tenant
                )
        except InvalidRequest as exc:
            print_invalid(exc, "measurements file")
            raise typer.Exit(EXIT_INVALID) from exc
        out.print(f"imported {summary['rows']} measurement(s) for tenant {tenant} (replaced {summary['replaced']})")

    @lat_app.command("matrix")
    def matrix_cmd(
        ctx: typer.Context,
        from_: Annotated[
            list[str] | None,
            typer.Option("--from", help="site id or geo:lat,lon (repeatable); default: every site"),
        ] = None,
        to: Annotated[list[str] | None, typer.Option(help="site id or geo:lat,lon (repeatable)")] = None,
        placement: Annotated[
            str | None, typer.Option(help="a stored placement: its request's user regions are targets too")
        ] = None,
        quantile: Annotated[str, typer.Option(help="p50 (typical) or p95 (conservative)")] = "p50",
        fmt: Annotated[str, typer.Option("--format", help="table, json or csv")] = "table",
        tenant: Tenant = "default",
    ) -> None:
        """Round-trip times from every --from to every --to (and the placement's user regions), each
        as GET /v1/latency gives it; at most 10,000 pairs. Exit 2 on a bad end or option."""
        from broker.catalog.latency_matrix import matrix_document
        from broker.errors import InvalidRequest, NotFound

        err = Console(stderr=True)
        if fmt not in ("table", "json", "csv"):
            err.print("[red]invalid --format:[/red] table, json or csv")
            raise typer.Exit(EXIT_INVALID)
        if quantile not in ("p50", "p95"):
            err.print(f"[red]invalid --quantile:[/red] p50 or p95, not {quantile!r}")
            raise typer.Exit(EXIT_INVALID)
        broker = edge(ctx).broker()
        try:
            doc = matrix_document(broker, from_, to, placement, quantile, tenant=tenant)
        except (InvalidRequest, NotFound) as exc:
            fields = sorted({str(e["loc"][1]) for e in getattr(exc, "errors", []) if len(e.get("loc", [])) > 1})
            err.print(f"[red]invalid {', '.join('--' + f for f in fields) or 'input'}:[/red] {exc.detail}")
            raise typer.Exit(EXIT_INVALID) from exc
        _print_matrix(doc, fmt)

    @lat_app.command("evaluate")
    def evaluate_cmd(
        file: Annotated[
            Path | None, typer.Option(help="measured pairs CSV src,dst,rtt_ms[,rtt_p95_ms]; default: the bundled ones")
        ] = None,
        folds: Annotated[int, typer.Option(min=2, max=20, help="k-fold over pairs (5: fit on 80 %, test on 20 %)")] = 5,
        seed: Annotated[int, typer.Option(help="seed of the random split into folds")] = 0,
        by_region: Annotated[bool, typer.Option(help="also leave one region out at a time (about a minute)")] = True,
        fmt: Annotated[str, typer.Option("--format", help="table or json")] = "table",
        check: Annotated[bool, typer.Option(help="exit 1 when a target of docs/latency.md is missed")] = False,
    ) -> None:
        """Fit on part of the measured pairs, estimate the rest, report errors in both settings."""
        from broker.core.latency_eval import check_targets, evaluate_kfold, evaluate_leave_one_region_out
        from broker.errors import InvalidRequest

        out, err = Console(), Console(stderr=True)
        if fmt not in ("table", "json"):
            err.print("[red]--format must be table or json[/red]")
            raise typer.Exit(EXIT_INVALID)
        try:
            sites, rows = _sites(), _rows(file)
            with err.status(f"{folds}-fold over measured pairs..."):
                evaluations = [evaluate_kfold(sites, rows, folds=folds, seed=seed)]
            if by_region:
                with err.status("leaving one region out at a time..."):
                    evaluations.append(evaluate_leave_one_region_out(sites, rows))
        except InvalidRequest as exc:
            print_invalid(exc, "latency file")
            raise typer.Exit(EXIT_INVALID) from exc
        except ValueError as exc:  # too few measured pairs to fit or score
            err.print(f"[red]cannot evaluate:[/red] {exc}")
            raise typer.Exit(EXIT_INVALID) from exc
        targets = check_targets(evaluations)
        if fmt == "json":
            print(json.dumps({"evaluations": [e.as_dict() for e in evaluations], "targets": targets}, indent=2))
        else:
            out.print(_table(evaluations))
            for ev in evaluations:
                methods = ", ".join(f"{k} {v}" for k, v in ev.scores["p50"].by_method.items())
                out.print(f"{ev.scheme}: estimates by method: {methods}")
            for t in targets:
                mark = "[green]met[/green]" if t["met"] else "[red]missed[/red]"
                out.print(f"{mark}  {t['scheme']}, {t['quantile']}: {t['metric']} {t['value']:.1f} (max {t['max']:g})")
        if check and not all(t["met"] for t in targets):
            raise typer.Exit(EXIT_FAILED)
