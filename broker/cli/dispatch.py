"""`broker clusters add|list|remove`, `broker dispatch ID [--dry-run]`, `broker replan ID`.

Exit codes: 0 done, 1 a cluster refused or could not be reached (the dispatch
record says which; run the same command again to resume), 2 invalid input,
3 infeasible (a replan that cannot keep every hard rule).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INFEASIBLE, EXIT_INVALID
from broker.cli.failures import print_infeasible, print_invalid
from broker.cli.options import Tenant, at_least
from broker.cli.stdout_guard import stdout_to_stderr
from broker.errors import BrokerError, Infeasible, InvalidRequest, NotFound

out, err = Console(), Console(stderr=True)


def _fail(exc: BrokerError) -> typer.Exit:
    if isinstance(exc, InvalidRequest):
        print_invalid(exc, "input")
        return typer.Exit(EXIT_INVALID)
    if isinstance(exc, Infeasible):
        print_infeasible(exc)
        return typer.Exit(EXIT_INFEASIBLE)
    err.print(f"[red]{exc.title}:[/red] {exc.detail}")
    return typer.Exit(EXIT_INVALID if isinstance(exc, NotFound) else EXIT_FAILED)


#: `broker clusters add`'s argument and options, by the ClusterIn field each one fills
_CLUSTER_OPTIONS = {
    "name": "NAME",
    "site": "--site",
    "kubeconfig": "--kubeconfig",
    "context": "--context",
    "gitops_dir": "--gitops-dir",
    "namespace": "--namespace",
}
DNS_LABEL = (
    "must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
)


def _cluster_option_error(e: Mapping[str, Any]) -> str:
    """One of ClusterIn's validation errors in the command's words: the option, its value and why."""
    field = str((e.get("loc") or [""])[0])
    option = _CLUSTER_OPTIONS.get(field)
    if option is None:  # the model's own check (one target, --context with a kubeconfig, ...)
        return f"[red]invalid:[/red] {escape(str(e.get('msg')))}"
    why = DNS_LABEL if field in ("name", "namespace") else str(e.get("msg"))
    return f"[red]invalid {option} {escape(repr(e.get('input')))}:[/red] {escape(why)}"


def _pairs(values: list[str], option: str, form: str) -> dict[str, str]:
    """`WORKLOAD=VALUE` options (repeated) by workload; a malformed one names the option and its form."""
    pairs = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key or not val:
            raise InvalidRequest(f"{option} must look like {form}, got {v!r}", errors=[{"loc": [option], "msg": v}])
        pairs[key] = val
    return pairs


def _replica_counts(values: list[str]) -> dict[str, int]:
    """`--replicas WORKLOAD=N`: N a whole number, said in the option's words (not int()'s)."""
    counts = {}
    for workload, n in _pairs(values, "--replicas", "WORKLOAD=N").items():
        try:
            counts[workload] = int(n)
        except ValueError:
            raise InvalidRequest(
                f"--replicas must look like WORKLOAD=N with N a whole number, got {workload}={n!r}",
                errors=[{"loc": ["--replicas"], "msg": f"{workload}={n}"}],
            ) from None
    return counts


def register(app: typer.Typer) -> None:
    clusters_app = typer.Typer(help="Target clusters of the sites (Kubernetes or GitOps).", no_args_is_help=True)
    app.add_typer(clusters_app, name="clusters")

    @clusters_app.command("add")
    def clusters_add(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="cluster name (DNS label)")],
        site: Annotated[str, typer.Option(help="site id, e.g. aws:eu-central-1")],
        kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig file")] = None,
        context: Annotated[str | None, typer.Option(help="kubeconfig context")] = None,
        gitops_dir: Annotated[Path | None, typer.Option(help="git work tree synced by Argo CD / Flux")] = None,
        namespace: Annotated[str, typer.Option(help="namespace of the workloads")] = "default",
        tenant: Tenant = "default",
    ) -> None:
        """Register a target cluster: --kubeconfig F --context C, or --gitops-dir PATH.

        Paths are on this machine and must lie under BROKER_SERVER_PATH_ROOTS (default: your home and the temp dir).
        """
        from pydantic import ValidationError

        from broker.access.keys import check_tenant
        from broker.dispatch.clusters import add_cluster
        from broker.dispatch.documents import ClusterIn
        from broker.dispatch.policy import TargetPolicy

        try:
            doc = ClusterIn(
                name=name,
                site=site,
                kubeconfig=str(kubeconfig) if kubeconfig else None,
                context=context,
                gitops_dir=str(gitops_dir) if gitops_dir else None,
                namespace=namespace,
            )
        except ValidationError as exc:
            for e in exc.errors(include_url=False):
                err.print(_cluster_option_error(e), soft_wrap=True)
            raise typer.Exit(EXIT_INVALID) from exc
        broker = edge(ctx).broker()
        try:
            cluster = add_cluster(
                broker.sessions,
                doc,
                known_sites=broker.catalog().sites,
                policy=TargetPolicy.from_settings(broker.settings),
                tenant=check_tenant(tenant),
                operator=True,  # whoever runs the CLI on the server's machine is its operator
            )
        except BrokerError as exc:
            raise _fail(exc) from exc
        out.print(
            f"registered {cluster.kind} cluster {cluster.name} for {cluster.site} (namespace {cluster.namespace})"
        )

    @clusters_app.command("list")
    def clusters_list(
        ctx: typer.Context,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
        tenant: Tenant = "default",
    ) -> None:
        """The registered clusters (credentials are never shown)."""
        from broker.dispatch.clusters import list_clusters

        clusters = list_clusters(edge(ctx).broker().sessions, tenant=tenant)
        if as_json:
            print(json.dumps([c.to_json() for c in clusters], indent=2))
            return
        table = Table("name", "site", "kind", "namespace", "target")
        for c in clusters:
            target = c.gitops_dir or c.gitops_repo or (c.kubeconfig or "stored kubeconfig")
            if c.kind == "kubernetes":
                target += f" ({c.context or 'current'})"
            table.add_row(c.name, c.site, c.kind, c.namespace, target)
        out.print(table)

    @clusters_app.command("remove")
    def clusters_remove(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="cluster name")],
        tenant: Tenant = "default",
    ) -> None:
        """Forget a cluster (what runs on it is left alone; the server's clone of its repository goes)."""
        from broker.dispatch.clusters import remove_cluster
        from broker.dispatch.policy import TargetPolicy

        broker = edge(ctx).broker()
        try:
            remove_cluster(broker.sessions, name, tenant=tenant, policy=TargetPolicy.from_settings(broker.settings))
        except BrokerError as exc:
            raise _fail(exc) from exc
        out.print(f"removed cluster {name}")

    @clusters_app.command("rotate-secrets")
    def clusters_rotate_secrets(ctx: typer.Context) -> None:
        """Re-encrypt every stored credential with the first key of BROKER_SECRET_KEY (after adding a new key
        in front); afterwards the old keys can be removed."""
        from broker.access.secretbox import SecretBox
        from broker.dispatch.clusters import rotate_sealed

        broker = edge(ctx).broker()
        try:
            count = rotate_sealed(broker.sessions, SecretBox.from_settings(broker.settings))
        except BrokerError as exc:
            raise _fail(exc) from exc
        out.print(f"re-encrypted {count} stored credential(s) with the first key")

    @app.command("dispatch")
    def dispatch(
        ctx: typer.Context,
        placement_id: Annotated[str, typer.Argument(help="stored placement id")],
        dry_run: Annotated[bool, typer.Option("--dry-run", help="print the manifests, apply nothing")] = False,
        template: Annotated[
            list[str] | None, typer.Option(help="WORKLOAD=FILE: the workload's own manifest template (repeat)")
        ] = None,
        image: Annotated[list[str] | None, typer.Option(help="WORKLOAD=IMAGE: container image (repeat)")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the dispatch document as JSON")] = False,
        tenant: Tenant = "default",
    ) -> None:
        """Dispatch a stored placement to its sites' clusters; run again to resume after a failure."""
        from broker.dispatch.documents import DispatchIn
        from broker.dispatch.manifests import to_yaml
        from broker.dispatch.outbox import FAILED, DispatchService

        try:
            templates = {
                w: Path(f).read_text() for w, f in _pairs(template or [], "--template", "WORKLOAD=FILE").items()
            }
            doc = DispatchIn(
                dry_run=dry_run, templates=templates, images=_pairs(image or [], "--image", "WORKLOAD=IMAGE")
            )
            result = DispatchService(edge(ctx).broker()).dispatch(placement_id, doc, tenant=tenant)
        except OSError as exc:
            err.print(f"[red]cannot read template:[/red] {exc}")
            raise typer.Exit(EXIT_INVALID) from exc
        except BrokerError as exc:
            raise _fail(exc) from exc
        if as_json:
            print(json.dumps(result, indent=2))
        elif dry_run:
            for c in result["clusters"]:
                print(f"# cluster {c['cluster']} namespace {c['namespace']}")
                print(to_yaml(c["manifests"]) if c["manifests"] else "# (nothing: replicas leave this cluster)\n")
        else:
            table = Table("cluster", "state", "replicas", "ready", "detail", title=f"dispatch {result['id']}")
            for c in result["clusters"]:
                res = c.get("result") or {}
                ready = res.get("ready_replicas")
                detail = c.get("error") or res.get("revision") or ", ".join(res.get("scaled_down") or [])
                table.add_row(
                    c["cluster"],
                    c["state"],
                    str(sum(c["replicas"].values())),
                    "-" if ready is None else str(sum(ready.values())),
                    detail or "",
                )
            out.print(table)
            out.print(f"state: {result['state']}")
        if result.get("state") == FAILED:
            err.print(f"[red]dispatch failed:[/red] {result.get('error')} (run the same command to resume)")
            raise typer.Exit(EXIT_FAILED)

    @app.command("replan")
    def replan(
        ctx: typer.Context,
        placement_id: Annotated[str, typer.Argument(help="stored placement id")],
        exclude_site: Annotated[list[str] | None, typer.Option(help="failed site to move away from (repeat)")] = None,
        replicas: Annotated[list[str] | None, typer.Option(help="WORKLOAD=N new replica count (repeat)")] = None,
        reason: Annotated[
            str, typer.Option(help="prices|capacity|demand|site_failure|consolidation|manual")
        ] = "manual",
        disruption_budget: Annotated[int, typer.Option(help="at most this many replicas move at once")] = 10,
        migration_cost: Annotated[float, typer.Option(callback=at_least(0), help="USD per moved replica")] = 0.05,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="store nothing")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="print the replan document as JSON")] = False,
        tenant: Tenant = "default",
    ) -> None:
        """Re-solve a stored placement; print the decision, the costs and the migration plan."""
        from pydantic import ValidationError

        from broker.dispatch.documents import ReplanIn
        from broker.dispatch.replan import ReplanService

        try:
            counts = _replica_counts(replicas or [])
            doc = ReplanIn(
                reason=reason,  # validated by the model
                exclude_sites=exclude_site or [],
                replicas=counts,
                disruption_budget=disruption_budget,
                migration_cost_per_replica=migration_cost,
                dry_run=dry_run,
            )
            with stdout_to_stderr():  # the re-solve prints nothing into a --json document
                result = ReplanService(edge(ctx).broker()).replan(placement_id, doc, tenant=tenant)
        except (ValueError, ValidationError) as exc:
            err.print(f"[red]invalid:[/red] {exc}")
            raise typer.Exit(EXIT_INVALID) from exc
        except BrokerError as exc:
            raise _fail(exc) from exc
        if as_json:
            print(json.dumps(result, indent=2))
            return
        m = result["migration"]
        out.print(
            f"decision: [bold]{result['decision']}[/bold]  old {result['old_cost_per_hour_now']:.4f} -> "
            f"new {result['new_cost_per_hour']:.4f} USD/h, migration {result['migration_cost']:.2f} USD, "
            f"{m['moved_replicas']} replicas move in {m['waves']} waves"
        )
        for f in result["forced_by"]:
            out.print(f"  forced by: {f}")
        table = Table("#", "wave", "action", "workload", "pool", "replicas", "traffic")
        for s in m["steps"]:
            table.add_row(
                str(s["index"]),
                str(s["wave"]),
                s["action"],
                s["workload"],
                s["pool"] or "",
                f"{s['from_replicas']} -> {s['to_replicas']}" if s["pool"] else "",
                f"{s['traffic_pct']} %" if s["traffic_pct"] else "",
            )
        out.print(table)
        if result.get("new_placement_id"):
            again = "" if tenant == "default" else f" --tenant {tenant}"
            out.print(
                f"new placement {result['new_placement_id']}: broker dispatch {result['new_placement_id']}{again}"
            )
