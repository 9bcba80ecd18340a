"""`broker kueue-dispatcher` and `broker ocm publish`: the broker inside Kueue's MultiKueue and Open
Cluster Management (docs/kubernetes.md)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from broker.cli.context import edge
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.kube import kube_api, stop_on_signals
from broker.cli.options import Tenant, at_least

if TYPE_CHECKING:
    from broker.app import Broker
    from broker.core.domain import Site
    from broker.core.pooltable import PoolTable

err = Console(stderr=True)
KubeconfigOpt = Annotated[Path | None, typer.Option(help="kubeconfig file (default: in-cluster service account)")]
ContextOpt = Annotated[str | None, typer.Option(help="context in the kubeconfig")]


def _registered(ctx: typer.Context, broker_tenant: str) -> tuple[Broker, dict[str, str]]:
    """The invocation's Broker, and the sites of the clusters the tenant registered, by name."""
    from broker.dispatch.clusters import list_clusters

    broker = edge(ctx).broker()
    return broker, {c.name: c.site for c in list_clusters(broker.sessions, tenant=broker_tenant)}


def register(app: typer.Typer) -> None:
    @app.command("kueue-dispatcher")
    def kueue_dispatcher(
        ctx: typer.Context,
        kubeconfig: KubeconfigOpt = None,
        context: ContextOpt = None,
        namespace: Annotated[str | None, typer.Option(help="watch one namespace (default: all)")] = None,
        name: Annotated[str, typer.Option(help="the dispatcherName Kueue is configured with")] = (
            "placement-broker.dev/multikueue-dispatcher"
        ),
        kueue_config: Annotated[
            str, typer.Option(help="Kueue's manager ConfigMap, NAMESPACE/NAME, checked for multiKueue.dispatcherName")
        ] = "kueue-system/kueue-manager-config",
        kueue_version: Annotated[
            str,
            typer.Option(
                help="Kueue API version: auto (v1beta2 where the cluster serves it, else v1beta1), v1beta1 or v1beta2"
            ),
        ] = "auto",
        step: Annotated[int, typer.Option(min=1, max=10, help="clusters added to a nomination per round")] = 1,
        round_seconds: Annotated[
            float,
            typer.Option(
                callback=at_least(1), help="how long nominated clusters get to admit before the next ones join"
            ),
        ] = 300.0,
        tenant: Tenant = "default",
        once: Annotated[bool, typer.Option(help="nominate what waits now, then exit")] = False,
    ) -> None:
        """Kueue MultiKueue external dispatcher: nominate worker clusters for waiting Workloads in the
        broker's cost and residency order (status.nominatedClusterNames, at most 10). Stops on SIGINT/SIGTERM."""
        from broker.operator.kueue import (
            KUEUE_VERSIONS,
            KueueDispatcher,
            KueueNotServed,
            kueue_configuration_problem,
            preferred_version,
            served_versions,
        )

        if kueue_version not in ("auto", *KUEUE_VERSIONS):
            err.print(f"[red]invalid:[/red] --kueue-version must be auto, v1beta1 or v1beta2, not {kueue_version!r}")
            raise typer.Exit(EXIT_INVALID)
        if "/" not in kueue_config:
            err.print(f"[red]invalid:[/red] --kueue-config must be NAMESPACE/NAME, not {kueue_config!r}")
            raise typer.Exit(EXIT_INVALID)
        api = kube_api(kubeconfig, context)
        fatal, problem = kueue_configuration_problem(api, kueue_config, name)
        if fatal:
            err.print(f"[red]invalid:[/red] {problem}")
            raise typer.Exit(EXIT_INVALID)
        if problem:
            err.print(f"[yellow]warning:[/yellow] {problem}")
        try:
            served = served_versions(api)
            kueue_version = preferred_version(served) if kueue_version == "auto" else kueue_version
        except KueueNotServed as exc:
            err.print(f"[red]failed:[/red] {exc}")
            raise typer.Exit(EXIT_FAILED) from exc
        if kueue_version not in served:  # a forced version the cluster does not serve: every call would 404
            shown = ", ".join(served) or "none"
            err.print(f"[red]invalid:[/red] --kueue-version {kueue_version}: the cluster serves kueue.x-k8s.io {shown}")
            raise typer.Exit(EXIT_INVALID)
        broker, registered = _registered(ctx, tenant)

        def prices() -> tuple[dict[str, Site], PoolTable]:
            catalog = broker.catalog()  # the current catalog: a price refresh shows without a restart
            return catalog.sites, catalog.solver_table(broker.settings.node_overhead())

        dispatcher = KueueDispatcher(
            api,
            prices,
            registered=registered,
            version=kueue_version,
            namespace=namespace,
            step=step,
            round_s=round_seconds,
        )
        if once:
            dispatcher.resync()
            err.print(f"nominated worker clusters for {dispatcher.nominations} workload(s)")
            return
        stop = stop_on_signals()
        err.print(
            f"dispatching MultiKueue Workloads in {namespace or 'all namespaces'} as {name} "
            f"(kueue.x-k8s.io/{dispatcher.version})"
        )
        dispatcher.run(stop)

    ocm_app = typer.Typer(
        help="Open Cluster Management: the broker's prices as placement scores.", no_args_is_help=True
    )
    app.add_typer(ocm_app, name="ocm")

    @ocm_app.command("publish")
    def ocm_publish(
        ctx: typer.Context,
        kubeconfig: KubeconfigOpt = None,
        context: ContextOpt = None,
        cluster: Annotated[
            list[str] | None, typer.Option(help="CLUSTER=SITE: the broker site of a managed cluster (repeatable)")
        ] = None,
        name: Annotated[str, typer.Option(help="the AddOnPlacementScore name (a Placement's resourceName)")] = (
            "placement-broker-prices"
        ),
        valid_for: Annotated[
            int | None, typer.Option(min=60, help="seconds the scores stay valid (default: 3 x --every, else 1 hour)")
        ] = None,
        every: Annotated[
            int | None, typer.Option(min=10, help="publish again every SECONDS until stopped (default: once)")
        ] = None,
        tenant: Tenant = "default",
    ) -> None:
        """Write one AddOnPlacementScore per managed cluster on the hub (namespace = cluster name) with
        costPerCore and spotCostPerCore scores, -100 (dearest) to 100 (cheapest)."""
        from kubernetes.client.exceptions import ApiException

        from broker.operator.ocm import ScorePublisher

        overrides: dict[str, str] = {}
        for item in cluster or []:
            c, sep, site = item.partition("=")
            if not sep or not c or not site:
                err.print(f"[red]invalid:[/red] --cluster {item!r} is not CLUSTER=SITE")
                raise typer.Exit(EXIT_INVALID)
            overrides[c] = site
        api = kube_api(kubeconfig, context)
        broker, registered = _registered(ctx, tenant)
        seconds = valid_for or (3 * every if every else 3600)
        publisher = ScorePublisher(
            api,
            lambda: broker.catalog().table,
            registered=registered,
            overrides=overrides,
            name=name,
            valid_for=timedelta(seconds=seconds),
        )
        if every:
            publisher.run(stop_on_signals(), every)
            return
        try:
            result = publisher.publish()
        except ApiException as exc:
            err.print(f"[red]failed:[/red] the hub answered {exc.status} {exc.reason}")
            raise typer.Exit(EXIT_FAILED) from exc
        for c, items in sorted(result.scores.items()):
            values = ", ".join(f"{s['name']}={s['value']}" for s in items)
            print(f"{c}\t{result.sites[c]}\t{values}")
        for note in result.notes:
            err.print(f"[yellow]not scored:[/yellow] {note}")
        err.print(f"published {len(result.scores)} AddOnPlacementScore(s) valid until {result.valid_until}")
