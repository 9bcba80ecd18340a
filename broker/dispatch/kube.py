"""Kubernetes dispatcher: server-side apply with the official client.

The same calls run against a live API server and the recorded-response server
of the tests: only the kubeconfig differs. Server-side apply (`fieldManager=
placement-broker`, `force=true`) makes every apply idempotent and lets other
managers (HPA, operators) own the fields they set.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from broker.dispatch import kubeconfig
from broker.dispatch.addresses import default_port, outbound_problem
from broker.dispatch.base import FIELD_MANAGER, ApplyFailed
from broker.dispatch.clusters import Cluster
from broker.dispatch.manifests import MANAGED_BY, PREFIX, ClusterBundle
from broker.dispatch.policy import TargetPolicy
from broker.errors import BrokerError, InvalidRequest

T = TypeVar("T")
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
RETRY_STATUS = {429, 500, 502, 503, 504}


class KubernetesDispatcher:
    def __init__(
        self,
        policy: TargetPolicy,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        ready_wait_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policy = policy
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.ready_wait_s = ready_wait_s
        self.sleep = sleep

    def _api_client(self, cluster: Cluster) -> Any:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        conf = client.Configuration()
        conf.retries = 0  # retries are ours, with backoff, so a dead server fails in bounded time
        if cluster.kubeconfig_sealed is not None:
            self._load_stored(cluster, conf)
            return client.ApiClient(conf)
        try:
            path = self.policy.server_path(cluster.kubeconfig or "", ["kubeconfig"])
        except InvalidRequest as exc:  # a row older than the roots, or roots narrowed since
            raise ApplyFailed(cluster.name, exc.detail) from exc
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(path),
                context=cluster.context,
                client_configuration=conf,
                persist_config=False,
            )
        except (ConfigException, OSError, ValueError, TypeError, AttributeError) as exc:
            raise ApplyFailed(cluster.name, f"kubeconfig {str(path)!r} cannot be loaded: {_why(exc)}") from exc
        return client.ApiClient(conf)

    def _load_stored(self, cluster: Cluster, conf: Any) -> None:
        """The tenant's kubeconfig: decrypted for this call only, checked again, certificates to a 0700 folder."""
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        try:
            doc = json.loads(self.policy.box.open(cluster.kubeconfig_sealed or ""))
            where = ["kubeconfig_content"]
            kubeconfig.check(doc, cluster.context, where, what="the stored kubeconfig", self_contained=True)
        except BrokerError as exc:
            raise ApplyFailed(cluster.name, exc.detail) from exc
        try:
            config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                config_dict=doc,
                context=cluster.context,
                client_configuration=conf,
                persist_config=False,
                temp_file_path=str(self.policy.kube_temp_dir()),
            )
        except (ConfigException, OSError, ValueError, TypeError, AttributeError) as exc:
            raise ApplyFailed(cluster.name, f"the stored kubeconfig cannot be loaded: {_why(exc)}") from exc
        # again at each connection: the name may resolve elsewhere now than at registration
        server = urlsplit(str(conf.host))
        port = default_port(server.scheme, server.port)
        why = outbound_problem(server.hostname or "", port, self.policy.allowed_networks)
        if why is not None:
            raise ApplyFailed(cluster.name, f"the API server is refused: {why}")

    def _call(self, cluster: str, what: str, fn: Callable[[], T]) -> T:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError as Urllib3Error

        attempt = 0
        while True:
            try:
                return fn()
            except ApiException as exc:
                retryable = exc.status in RETRY_STATUS
                detail = f"{what}: HTTP {exc.status} {_status_message(exc.body) or exc.reason}"
            except Urllib3Error as exc:
                retryable = True
                detail = f"{what}: API server unreachable ({type(exc).__name__}: {exc})"
            if not retryable or attempt >= self.retries:
                raise ApplyFailed(cluster, detail, retryable=retryable)
            self.sleep(self.backoff_s * (2**attempt))
            attempt += 1

    def apply(self, cluster: Cluster, bundle: ClusterBundle, *, ready_wait_s: float | None = None) -> dict[str, Any]:
        """`ready_wait_s` overrides the dispatcher's wait for ready replicas (a migration's waves)."""
        from kubernetes import client

        api = self._api_client(cluster)
        try:
            core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
            ns = bundle.namespace
            opts: dict[str, Any] = {
                "field_manager": FIELD_MANAGER,
                "force": True,
                "_content_type": APPLY_PATCH,
                "_preload_content": False,
                "_request_timeout": self.timeout_s,
            }
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            self._call(cluster.name, f"apply namespace {ns}", lambda: core.patch_namespace(ns, namespace, **opts))
            applied: list[str] = []
            for m in bundle.manifests:
                name, kind = m["metadata"]["name"], m["kind"]
                patch = (
                    apps.patch_namespaced_stateful_set if kind == "StatefulSet" else apps.patch_namespaced_deployment
                )
                self._call(
                    cluster.name,
                    f"apply {kind} {ns}/{name}",
                    lambda patch=patch, name=name, m=m: patch(name, ns, m, **opts),  # type: ignore[misc]
                )
                applied.append(name)
            scaled_down = self._scale_down_leavers(cluster.name, apps, bundle, set(applied))
            wait = self.ready_wait_s if ready_wait_s is None else ready_wait_s
            ready = self._ready(cluster.name, apps, bundle, wait)
        finally:
            api.close()
        return {
            "kind": "kubernetes",
            "applied": applied,
            "scaled_down": scaled_down,
            "replicas": bundle.replicas(),
            "ready_replicas": ready,
        }

    def _scale_down_leavers(self, cluster: str, apps: Any, bundle: ClusterBundle, keep: set[str]) -> list[str]:
        """Deployments and StatefulSets of this app that the placement no longer puts here go to 0.

        Scaled to zero rather than deleted, so a rollback is one scale-up away.
        """
        ns = bundle.namespace
        # scoped to this registered cluster too: two registrations may share one API server
        selector = f"app.kubernetes.io/managed-by={MANAGED_BY},{PREFIX}/app={bundle.app},{PREFIX}/cluster={cluster}"
        kinds = (
            ("deployments", apps.list_namespaced_deployment, apps.patch_namespaced_deployment_scale),
            ("statefulsets", apps.list_namespaced_stateful_set, apps.patch_namespaced_stateful_set_scale),
        )
        out = []
        for resource, list_fn, scale_fn in kinds:
            resp = self._call(
                cluster,
                f"list {resource} in {ns}",
                lambda list_fn=list_fn: list_fn(  # type: ignore[misc]
                    ns, label_selector=selector, _preload_content=False, _request_timeout=self.timeout_s
                ),
            )
            for item in json.loads(resp.data).get("items", []):
                name = item["metadata"]["name"]
                if name in keep or not item.get("spec", {}).get("replicas"):
                    continue
                self._call(
                    cluster,
                    f"scale {ns}/{name} to 0",
                    lambda name=name, scale_fn=scale_fn: scale_fn(  # type: ignore[misc]
                        name,
                        ns,
                        {"spec": {"replicas": 0}},
                        _content_type=MERGE_PATCH,
                        _preload_content=False,
                        _request_timeout=self.timeout_s,
                    ),
                )
                out.append(name)
        return out

    def _ready(self, cluster: str, apps: Any, bundle: ClusterBundle, wait_s: float) -> dict[str, int]:
        """Read back ready replicas, polling up to wait_s for them to reach the plan."""
        deadline = time.monotonic() + wait_s
        want = bundle.replicas()
        while True:
            ready: dict[str, int] = {}
            for m in bundle.manifests:
                name = m["metadata"]["name"]
                read = (
                    apps.read_namespaced_stateful_set_status
                    if m["kind"] == "StatefulSet"
                    else apps.read_namespaced_deployment_status
                )
                resp = self._call(
                    cluster,
                    f"read {bundle.namespace}/{name}",
                    lambda read=read, name=name: read(  # type: ignore[misc]
                        name, bundle.namespace, _preload_content=False, _request_timeout=self.timeout_s
                    ),
                )
                ready[name] = int(json.loads(resp.data).get("status", {}).get("readyReplicas") or 0)
            if ready == want or time.monotonic() >= deadline:
                return ready
            self.sleep(min(2.0, max(0.1, deadline - time.monotonic())))


def _why(exc: Exception) -> str:
    """The client's own words for a bad kubeconfig (they name keys and entries, not values);
    for any other error only its type, since its text may quote the file."""
    from kubernetes.config.config_exception import ConfigException

    return str(exc) if isinstance(exc, ConfigException) else type(exc).__name__


def _status_message(body: Any) -> str:
    """The message of a Kubernetes Status object, if the body is one."""
    try:
        doc = json.loads(body) if isinstance(body, str | bytes) else None
    except ValueError:
        return ""
    return str(doc.get("message", "")) if isinstance(doc, dict) else ""
