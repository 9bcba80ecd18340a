"""The Kubernetes API client of the commands that run beside a cluster (`broker operator`,
`broker kueue-dispatcher`, `broker ocm publish`): from a kubeconfig file or the pod's service
account, or a message naming what is wrong and exit 2, never a traceback."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from broker.cli.exit_codes import EXIT_INVALID

if TYPE_CHECKING:
    from kubernetes import client


def kube_api(kubeconfig: Path | None, context: str | None) -> client.ApiClient:
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    from broker.dispatch.clusters import check_kubeconfig_file
    from broker.errors import InvalidRequest

    err = Console(stderr=True)
    if kubeconfig is not None:
        try:  # the checks `broker clusters add` makes, in words rather than the client's exceptions
            check_kubeconfig_file(kubeconfig, context, [])
        except InvalidRequest as exc:
            err.print(f"[red]invalid:[/red] --kubeconfig: {escape(exc.detail)}", soft_wrap=True)
            raise typer.Exit(EXIT_INVALID) from exc
    try:
        if kubeconfig is not None:
            api: client.ApiClient = config.new_client_from_config(config_file=str(kubeconfig), context=context)  # type: ignore[no-untyped-call]
            return api
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        return client.ApiClient()
    # the client's loader raises what the file's content makes it raise: YAML errors, and
    # key/type errors on a document that is YAML but no kubeconfig
    except (ConfigException, OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        where = f"--kubeconfig {kubeconfig}" if kubeconfig is not None else "the pod's service account (no kubeconfig)"
        why = f"cannot use the Kubernetes configuration of {where}: {type(exc).__name__}: {exc}"
        err.print(f"[red]invalid:[/red] {escape(why)}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from exc


def stop_on_signals() -> threading.Event:
    """Set on SIGINT or SIGTERM: a controller loop ends its current pass and returns."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop
