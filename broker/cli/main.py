"""The `broker` command (see ../shared/spec/cli-and-files.md for the contract)."""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
import yaml
from rich.console import Console
from rich.markup import escape

from broker.cli import (
    admin,
    dispatch,
    export,
    finops,
    forecast,
    latency,
    multicluster,
    operator,
    pricing,
    remote,
    rl,
    simulate,
    sites,
    usage,
)
from broker.cli.context import Edge, edge
from broker.cli.exit_codes import EXIT_INFEASIBLE, EXIT_INVALID, EXIT_OVER_LIMIT, EXIT_UNREACHABLE
from broker.cli.failures import print_infeasible, print_invalid
from broker.cli.options import Tenant, at_least
from broker.cli.stdout_guard import stdout_to_stderr
from broker.errors import BrokerError, Infeasible, InvalidRequest, OverBudget

app = typer.Typer(help="Hybrid-cloud, cost-optimizing placement broker.", no_args_is_help=True, add_completion=False)
catalog_app = typer.Typer(help="The bundled price and site catalog.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")

out = Console()
err = Console(stderr=True)


@app.callback()
def _edge(ctx: typer.Context) -> None:
    # built lazily: settings and the Broker come into being when a command first asks
    ctx.obj = Edge()
    ctx.call_on_close(ctx.obj.close)


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8080,
    workers: Annotated[int, typer.Option(help="worker processes")] = 1,
) -> None:
    """Migrate the database, load the catalog if empty, serve the API. Exit 2 when the address
    cannot be listened on (the port in use, a host that is not this machine's): checked first."""
    import uvicorn

    from broker.cli.listening import check_address_or_exit

    _ = edge(ctx).settings  # a malformed setting: its one line before anything else
    check_address_or_exit(host, port)
    first = "the first start loads ~190k prices: about 10 s on an idle machine"
    with err.status(f"preparing database and catalog ({first})..."):
        cat = edge(ctx).broker().catalog()
    err.print(f"catalog {cat.version[:8]}: {len(cat.sites)} sites, {cat.table.n_pools} pools")
    check_address_or_exit(host, port)  # again: preparing took seconds, something may have taken it since
    err.print(f"serving on http://{host}:{port}  (docs at /docs)")
    # by import string, so the CLI (broker layer) does not import the api layer. Each server
    # process builds its own Broker there (api.main); this one only prepared the database
    # before any worker starts, so it lets its connections go. The in-process catalog cache
    # is shared by version with the app built in this process.
    edge(ctx).close()
    # a restarted server's counters start at zero: the samples a previous run left in
    # PROMETHEUS_MULTIPROC_DIR go before any server process starts (not this one's own)
    from broker.observability import clear_multiprocess_dir

    clear_multiprocess_dir(keep_pid=os.getpid())
    uvicorn.run("api.main:app", host=host, port=port, workers=workers, log_level="info")


@catalog_app.command("load")
def catalog_load(ctx: typer.Context) -> None:
    """(Re)load the bundled price and site snapshot."""
    from broker.catalog import store as catalog

    broker = edge(ctx).broker()
    with err.status("loading bundled catalog..."):
        counts = catalog.load_snapshot(broker.sessions)
    out.print(f"loaded {counts['sites']} sites, {counts['pools']} pools, {counts['latency_pairs']} latency pairs")


def _read_request(path: Path) -> Any:
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise InvalidRequest(
            f"cannot read {path}: {exc.strerror}", errors=[{"loc": ["file"], "msg": str(exc)}]
        ) from exc
    try:
        text = raw.decode("utf-8")  # the contract's documents are UTF-8, whatever the locale
    except UnicodeDecodeError as exc:
        msg = f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); is it a binary file?"
        raise InvalidRequest(f"{path} is {msg}", errors=[{"loc": ["file"], "msg": msg}]) from exc
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InvalidRequest(
            f"{path} is not valid JSON/YAML: {exc}", errors=[{"loc": ["file"], "msg": str(exc)}]
        ) from exc
    except RecursionError:  # deeper than the parsers go; no request document nests like that
        msg = "not a document the broker reads: its lists or mappings are nested too deeply"
        raise InvalidRequest(f"{path} is {msg}", errors=[{"loc": ["file"], "msg": msg}]) from None


@app.command()
def place(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("-f", "--file", help="request document (JSON or YAML; - for stdin)")],
    server: Annotated[
        str | None, typer.Option(help="the broker's root URL (e.g. http://broker:8080); embedded when omitted")
    ] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="output format")] = OutputFormat.table,
    max_cost_per_hour: Annotated[
        float | None, typer.Option(callback=at_least(0), help="exit 4 when the plan costs more")
    ] = None,
    max_increase_pct: Annotated[
        float | None,
        typer.Option(
            callback=at_least(0), help="exit 4 when the plan costs this much more than the stored one of the same name"
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            callback=at_least(0),
            help="with --server: seconds to wait for a queued job (the server answered 202) to finish; "
            "exit 1 when it has not",
        ),
    ] = remote.DEFAULT_JOB_TIMEOUT_S,
    reproducible: Annotated[
        bool,
        typer.Option(
            "--reproducible",
            help='solve as the request\'s "reproducible": true: the search ends on work limits, not the clock, '
            "so the same request gets the same placement and cost on every run and machine (a CI gate's "
            "answer); slower on big requests. Without it an answer not proven optimal warns that it depends "
            "on the clock",
        ),
    ] = False,
    tenant: Tenant = "default",
) -> None:
    """Place a request. Exit codes: 0 placed, 1 a server error or a job not finished within
    --timeout, 2 invalid input, 3 infeasible, 4 over a cost limit, 5 --server unreachable or not a broker.

    For a CI gate, use --reproducible: the same request then gets the same answer on every run."""
    doc: Any = None
    if server is not None and getattr(ctx.get_parameter_source("tenant"), "name", None) == "COMMANDLINE":
        raise typer.BadParameter(
            "against a server the API key's tenant is the placement's; --tenant is for embedded runs",
            param_hint="'--tenant'",
        )
    try:
        doc = _read_request(file)
        if reproducible and isinstance(doc, dict):  # not a mapping: the request's own validation says so
            doc = {**doc, "reproducible": True}
        if server is not None:  # an empty one too: it is an error, not an embedded run
            with remote.client(remote.root_url(server), remote.auth(edge(ctx).settings.api_key)) as http:
                previous = remote.previous(http, str(doc.get("name", ""))) if isinstance(doc, dict) else None
                result = remote.place(http, doc, timeout_s=timeout)
        else:
            from broker.placements.documents import placement_document

            broker = edge(ctx).broker()
            previous = None
            if isinstance(doc, dict) and doc.get("name"):
                items, _ = broker.list_placements(tenant=tenant, name=str(doc["name"]), limit=1)
                previous = placement_document(broker.get_placement(items[0].id, tenant=tenant)) if items else None
            with err.status("solving..."), stdout_to_stderr():
                # nothing times out an embedded run: it gets the asynchronous cap, like a job
                result = placement_document(broker.place(doc, tenant=tenant, synchronous=False)[0])
    except Infeasible as exc:
        _print_infeasible(exc, fmt, _name(doc))
        raise typer.Exit(EXIT_INFEASIBLE) from exc
    except InvalidRequest as exc:
        _print_invalid(exc, fmt, _name(doc))
        raise typer.Exit(EXIT_INVALID) from exc
    except OverBudget as exc:
        _print_over_budget(exc, fmt, _name(doc))
        raise typer.Exit(EXIT_OVER_LIMIT) from exc
    except BrokerError as exc:
        err.print(f"[red]{exc.title}: {exc.detail}[/red]")
        raise typer.Exit(1) from exc
    except remote.InvalidServer as exc:
        err.print(f"[red]invalid --server:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from exc
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        err.print(f"[red]invalid --server {escape(str(server))}:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from exc
    except remote.NotABroker as exc:  # --server names something else: like a broker out of reach
        err.print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(EXIT_UNREACHABLE) from exc
    except httpx.TransportError as exc:  # refused, unknown host, TLS, timeout: one line, not a traceback
        why = escape(str(exc) or type(exc).__name__)
        err.print(f"[red]cannot reach {escape(str(server))}:[/red] {why}", soft_wrap=True)
        raise typer.Exit(EXIT_UNREACHABLE) from exc

    from broker.cli.render import render_markdown, render_table

    if fmt is OutputFormat.json:
        out.print_json(json.dumps(result))
    elif fmt is OutputFormat.markdown:
        print(
            render_markdown(
                result,
                previous=previous,
                request=doc,
                sites=None if server is not None else broker.catalog().sites,
                max_cost_per_hour=max_cost_per_hour,
                max_increase_pct=max_increase_pct,
            )
        )
    else:
        render_table(out, result)

    over = []
    cost = float(result["cost_per_hour"])
    if max_cost_per_hour is not None and cost > max_cost_per_hour + 1e-9:
        over.append(f"cost {cost:.4f} USD/h is above --max-cost-per-hour {max_cost_per_hour:g}")
    if max_increase_pct is not None and previous is not None:
        prev = float(previous["cost_per_hour"])
        if prev > 0 and (cost - prev) / prev * 100 > max_increase_pct + 1e-9:
            over.append(
                f"cost rises {(cost - prev) / prev * 100:.1f}% over placement {previous.get('id')} "
                f"(limit {max_increase_pct:g}%)"
            )
    if over:
        for line in over:
            err.print(f"[red]over limit:[/red] {line}")
        raise typer.Exit(EXIT_OVER_LIMIT)


def _name(doc: Any) -> str:
    """The request's name for a failure's document (none when the file could not be read)."""
    return str(doc.get("name") or "") if isinstance(doc, dict) else ""


# A failed `broker place`: the message on stderr and, with --format json or markdown, a document
# on stdout, so a pipeline parsing or posting stdout gets what failed and why, never nothing.


def _print_infeasible(exc: Infeasible, fmt: OutputFormat, name: str) -> None:
    from broker.cli.render import render_infeasible_markdown

    print_infeasible(exc)
    if fmt is OutputFormat.json:
        print(json.dumps({"status": "infeasible", "detail": exc.detail, "conflicts": exc.conflicts}, indent=2))
    elif fmt is OutputFormat.markdown:
        print(render_infeasible_markdown(name, exc.detail, exc.conflicts))


def _print_invalid(exc: InvalidRequest, fmt: OutputFormat, name: str) -> None:
    from broker.cli.render import render_invalid_markdown

    print_invalid(exc, "request")
    if fmt is OutputFormat.json:
        print(json.dumps({"status": "invalid", "detail": exc.detail, "errors": exc.errors}, indent=2))
    elif fmt is OutputFormat.markdown:
        print(render_invalid_markdown(name, exc.detail, exc.errors))


def _print_over_budget(exc: OverBudget, fmt: OutputFormat, name: str) -> None:
    from broker.cli.render import render_over_budget_markdown

    err.print(f"[red]over budget:[/red] {escape(exc.detail)}", soft_wrap=True)
    budget = exc.extra.get("budget")
    if fmt is OutputFormat.json:
        print(json.dumps({"status": "over_budget", "detail": exc.detail, "budget": budget}, indent=2))
    elif fmt is OutputFormat.markdown:
        print(render_over_budget_markdown(name, exc.detail, budget if isinstance(budget, dict) else None))


# Command groups beyond the core ones above, each module's `register(app)`. Their order matters
# only if two took one name (the later would replace the earlier): tests/unit/cli/
# test_command_groups.py fails then, and when a module's `register` is missing here
COMMAND_GROUPS = (
    admin.register,
    pricing.register,
    sites.register,
    export.register,
    finops.register,
    dispatch.register,
    usage.register,
    forecast.register,
    operator.register,
    multicluster.register,
    latency.register,
    simulate.register,
    rl.register,
)
for register in COMMAND_GROUPS:
    register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
