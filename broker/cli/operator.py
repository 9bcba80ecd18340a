"""`broker operator`: reconcile PlacementRequest custom resources (docs/kubernetes.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from broker.cli.context import edge


def register(app: typer.Typer) -> None:
    @app.command()
    def operator(
        ctx: typer.Context,
        kubeconfig: Annotated[
            Path | None, typer.Option(help="kubeconfig file (default: in-cluster service account)")
        ] = None,
        context: Annotated[str | None, typer.Option(help="context in the kubeconfig")] = None,
        namespace: Annotated[str | None, typer.Option(help="watch one namespace (default: all)")] = None,
    ) -> None:
        """Watch PlacementRequests, solve each new spec, write status and events, dispatch when
        `spec.dispatch` is true. The namespace is the broker tenant. Stops on SIGINT/SIGTERM."""
        from broker.cli.kube import kube_api, stop_on_signals
        from broker.operator.controller import PlacementController

        err = Console(stderr=True)
        api = kube_api(kubeconfig, context)
        stop = stop_on_signals()
        controller = PlacementController(edge(ctx).broker(), api, namespace=namespace)
        err.print(f"watching PlacementRequests in {namespace or 'all namespaces'}")
        controller.run(stop)
