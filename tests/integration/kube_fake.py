"""A local HTTP server that answers like a Kubernetes API server (v1.31) for the calls the dispatcher makes.

No API server can run on these machines, so the dispatcher is tested against
this one through a kubeconfig pointing at http://127.0.0.1:<port>: the official
client, its serialisation and its error handling run exactly as against a live
cluster. Response bodies follow the API server's wire format (objects with
uid/resourceVersion/generation/managedFields, `Status` documents for errors,
`DeploymentList`, `autoscaling/v1` `Scale`), and the server enforces what a real
one enforces for these calls: server-side apply needs
`Content-Type: application/apply-patch+yaml` and a `fieldManager`, a namespaced
object needs its namespace, `force` is refused on non-apply patches.

The object state is kept in memory; `ready` simulates the controllers by
reporting every desired replica ready.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        doc["details"] = details
    return doc


class FakeKube:
    def __init__(self) -> None:
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.deployments: dict[tuple[str, str], dict[str, Any]] = {}
        self.statefulsets: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]], str]] = []  # method, path, query, ctype
        self.fail: list[tuple[str, str, int]] = []  # (method, path substring, status): one-shot faults
        self.ready_cap: int | None = None  # at most this many ready replicas per Deployment (pods still starting)
        self.rv = 1000
        self.lock = threading.Lock()

    # ---- helpers --------------------------------------------------------------------

    def _meta(self, old: dict[str, Any] | None, new_meta: dict[str, Any], manager: str, api: str) -> dict[str, Any]:
        self.rv += 1
        meta = dict(new_meta)
        meta["uid"] = (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4())
        meta["resourceVersion"] = str(self.rv)
        meta["creationTimestamp"] = (old or {}).get("metadata", {}).get("creationTimestamp") or _now()
        meta["managedFields"] = [
            {
                "manager": manager,
                "operation": "Apply",
                "apiVersion": api,
                "time": _now(),
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {}, "f:annotations": {}}, "f:spec": {}},
            }
        ]
        return meta

    def deployment_view(self, d: dict[str, Any]) -> dict[str, Any]:
        n = int(d["spec"].get("replicas", 1))
        ready = n if self.ready_cap is None else min(n, self.ready_cap)
        return {
            **d,
            "status": {
                "observedGeneration": d["metadata"]["generation"],
                "replicas": n,
                "updatedReplicas": n,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True",
                        "lastUpdateTime": _now(),
                        "lastTransitionTime": _now(),
                        "reason": "MinimumReplicasAvailable",
                        "message": "Deployment has minimum availability.",
                    }
                ],
            }
            if n
            else {"observedGeneration": d["metadata"]["generation"]},
        }

    # ---- request handling -----------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, list[str]], ctype: str, body: bytes) -> tuple[int, Any]:
        with self.lock:
            self.requests.append((method, path, query, ctype))
            for i, (m, frag, code) in enumerate(self.fail):
                if m == method and frag in path:
                    del self.fail[i]
                    return code, status(
                        code, "ServiceUnavailable", "the server is currently unable to handle the request"
                    )
            return self._route(method, path, query, ctype, body)

    def _apply_checks(self, query: dict[str, list[str]], ctype: str) -> tuple[int, Any] | None:
        if ctype == "application/apply-patch+yaml":
            if not query.get("fieldManager"):
                return 422, status(
                    422,
                    "Invalid",
                    'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                )
            return None
        if query.get("force"):
            return 422, status(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch',
            )
        return None

    def _route(self, method: str, path: str, query: dict[str, list[str]], ctype: str, body: bytes) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        # /api/v1/namespaces/{name}
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4 and method == "PATCH":
            bad = self._apply_checks(query, ctype)
            if bad or ctype != "application/apply-patch+yaml":
                return bad or (
                    415,
                    status(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types include: "
                        "application/apply-patch+yaml",
                    ),
                )
            obj = yaml.safe_load(body)
            name = parts[3]
            old = self.namespaces.get(name)
            meta = self._meta(old, obj.get("metadata", {}), query["fieldManager"][0], "v1")
            meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": name}
            self.namespaces[name] = {
                "kind": "Namespace",
                "apiVersion": "v1",
                "metadata": meta,
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
            return (200 if old else 201), self.namespaces[name]
        kinds = {"deployments": "Deployment", "statefulsets": "StatefulSet"}
        if parts[:4] == ["apis", "apps", "v1", "namespaces"] and len(parts) >= 6 and parts[5] in kinds:
            resource, kind = parts[5], kinds[parts[5]]
            store = self.deployments if resource == "deployments" else self.statefulsets
            ns = parts[4]
            if ns not in self.namespaces:
                return 404, status(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
            if len(parts) == 6 and method == "GET":
                return 200, self._list(ns, query, store, kind)
            name = parts[6]
            key = (ns, name)
            sub = parts[7] if len(parts) > 7 else None
            if method == "PATCH" and sub is None:
                bad = self._apply_checks(query, ctype)
                if bad or ctype != "application/apply-patch+yaml":
                    return bad or (415, status(415, "UnsupportedMediaType", "unsupported patch type"))
                obj = yaml.safe_load(body)
                old = store.get(key)
                meta = self._meta(old, obj["metadata"], query["fieldManager"][0], "apps/v1")
                changed = old is None or old["spec"] != obj["spec"]
                meta["generation"] = (old["metadata"]["generation"] if old else 0) + (1 if changed else 0)
                store[key] = {
                    "kind": kind,
                    "apiVersion": "apps/v1",
                    "metadata": meta,
                    "spec": obj["spec"],
                }
                return (200 if old else 201), self.deployment_view(store[key])
            if key not in store:
                return 404, status(
                    404,
                    "NotFound",
                    f'{resource}.apps "{name}" not found',
                    {"name": name, "group": "apps", "kind": resource},
                )
            d = store[key]
            if method == "GET" and sub in (None, "status"):
                return 200, self.deployment_view(d)
            if method == "PATCH" and sub == "scale":
                bad = self._apply_checks(query, ctype)
                if bad or ctype != "application/merge-patch+json":
                    return bad or (415, status(415, "UnsupportedMediaType", "unsupported patch type"))
                d["spec"]["replicas"] = int(json.loads(body)["spec"]["replicas"])
                d["metadata"]["generation"] += 1
                self.rv += 1
                d["metadata"]["resourceVersion"] = str(self.rv)
                return 200, {
                    "kind": "Scale",
                    "apiVersion": "autoscaling/v1",
                    "metadata": {
                        k: d["metadata"][k]
                        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                    },
                    "spec": {"replicas": d["spec"]["replicas"]},
                    "status": {
                        "replicas": d["spec"]["replicas"],
                        "selector": ",".join(f"{k}={v}" for k, v in d["spec"]["selector"]["matchLabels"].items()),
                    },
                }
        return 404, status(404, "NotFound", "the server could not find the requested resource")

    def _list(
        self, ns: str, query: dict[str, list[str]], store: dict[tuple[str, str], dict[str, Any]], kind: str
    ) -> dict[str, Any]:
        want: dict[str, str] = {}
        for term in (query.get("labelSelector") or [""])[0].split(","):
            if "=" in term:
                k, v = term.split("=", 1)
                want[k] = v
        items = [
            self.deployment_view(d)
            for (n, _), d in sorted(store.items())
            if n == ns and all(d["metadata"].get("labels", {}).get(k) == v for k, v in want.items())
        ]
        self.rv += 1
        return {
            "kind": f"{kind}List",
            "apiVersion": "apps/v1",
            "metadata": {"resourceVersion": str(self.rv)},
            "items": items,
        }

    def replicas(self) -> dict[tuple[str, str], int]:
        return {k: int(d["spec"]["replicas"]) for k, d in self.deployments.items()}


class _Handler(BaseHTTPRequestHandler):
    kube: FakeKube

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0]
        code, doc = self.kube.handle(self.command, url.path, parse_qs(url.query), ctype, body)
        raw = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve_fake_kube() -> Iterator[tuple[FakeKube, str]]:
    kube = FakeKube()
    handler = type("Handler", (_Handler,), {"kube": kube})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield kube, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def write_kubeconfig(path: Path, server: str, context: str = "edge-1") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": context, "cluster": {"server": server}}],
                "users": [{"name": f"{context}-admin", "user": {"token": "test-token"}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-admin"}}],
                "current-context": context,
            }
        )
    )
    return path
