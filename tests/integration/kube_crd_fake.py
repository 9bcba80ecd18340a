"""A local API server for custom resources, speaking the Kubernetes wire format.

It serves the broker's CRDs (deploy/crds/) and any other CRD a test passes (the Kueue and OCM
resources of tests/integration/crds/), namespaced or cluster-scoped, with the semantics a real
API server has:

* list with `metadata.resourceVersion`, and `?watch=true` streaming newline-delimited
  `{"type", "object"}` events after that version; a version older than the compaction point gets
  the real server's answer, an `ERROR` event carrying a 410 `Status` ("too old resource version");
* create validated against the CRD's openAPIV3Schema (422 `Invalid` naming the field, as admission does),
  and fields the schema does not specify pruned (dropped silently, as for a structural schema);
* `metadata.generation` bumped on spec changes only; the `status` subresource changes status only,
  and a PUT with a stale `metadata.resourceVersion` gets 409 `Conflict`;
* delete with finalizers sets `deletionTimestamp`; the object goes once its finalizers are removed;
* server-side apply (`PATCH` with `application/apply-patch+yaml`, `fieldManager` required,
  `force`), creating the object when missing, with field ownership in `metadata.managedFields`
  (kube_apply.py); merge patches and PUTs record their manager too;
* core/v1 Events recorded;
* API discovery: `/apis` and `/apis/<group>` list the versions each group's CRDs serve.

Tests can compact the history (`compact()`), inject one-shot status conflicts (`conflicts`) and
read every write request (`requests`: method, path, content type, query).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import yaml

from tests.integration import kube_apply
from tests.integration.kube_fake import status

CRD_DIR = Path(__file__).resolve().parents[2] / "deploy" / "crds"
TEST_CRD_DIR = Path(__file__).resolve().parent / "crds"
GROUP, VERSION = "placement-broker.dev", "v1alpha1"
APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True)
class Resource:
    group: str
    versions: tuple[str, ...]
    kind: str
    schema: dict[str, Any]
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.versions[0]}"


def load_crds(paths: Iterable[Path]) -> list[dict[str, Any]]:
    return [
        d for p in paths for d in yaml.safe_load_all(p.read_text()) if d and d.get("kind") == "CustomResourceDefinition"
    ]


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order: GA above beta above alpha, then the higher numbers (v1 > v1beta2 > v1beta1)."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if m is None:
        return (-1, 0, 0)
    return (int(m[1]), {"alpha": 0, "beta": 1, None: 2}[m[2]], int(m[3] or 0))


def _re2_pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """`pattern` as the API server reads it (Go's RE2): a leading `^(?i)` is RE2 syntax Python's `re`
    refuses (global flags must open the expression), so the flags move in front of the `^`."""
    flags = re.match(r"\^\((\?[aimsux]+)\)", pattern)
    if flags:
        pattern = f"({flags[1]})^{pattern[flags.end() :]}"
    if validator.is_type(instance, "string") and not re.search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


SchemaValidator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"pattern": _re2_pattern})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(base: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def prune(schema: dict[str, Any], value: Any) -> Any:
    """`value` without the object fields `schema` does not specify, as an API server prunes them
    (kept under x-kubernetes-preserve-unknown-fields; an object schema without `properties` is
    kept whole here, the real server would empty it)."""
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(schema["items"], v) for v in value]
    if not isinstance(value, dict):
        return value
    if isinstance(schema.get("additionalProperties"), dict):
        return {k: prune(schema["additionalProperties"], v) for k, v in value.items()}
    props = schema.get("properties")
    if props is None:
        return value
    keep = schema.get("x-kubernetes-preserve-unknown-fields")
    return {k: prune(props[k], v) if k in props else v for k, v in value.items() if k in props or keep}


def prune_object(schema: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """A whole object pruned; apiVersion, kind and metadata are the server's, never pruned."""
    own = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    return {**prune(schema, obj), **own}


class FakeCustomResources:
    def __init__(self, extra_crds: Iterable[dict[str, Any]] = ()) -> None:
        self.resources: dict[str, Resource] = {}  # plural -> what it is (plurals are unique here)
        for crd in [*load_crds(sorted(CRD_DIR.glob("*.yaml"))), *extra_crds]:
            spec = crd["spec"]
            versions = [v for v in spec["versions"] if v.get("served", True)]
            stored = next(v for v in versions if v.get("storage"))
            self.resources[spec["names"]["plural"]] = Resource(
                spec["group"],
                tuple(v["name"] for v in [stored, *[v for v in versions if v is not stored]]),
                spec["names"]["kind"],
                stored["schema"]["openAPIV3Schema"],
                spec.get("scope", "Namespaced") == "Namespaced",
            )
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (plural, ns or "", name)
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, plural, type, object)
        self.events: list[dict[str, Any]] = []
        self.configmaps: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> ConfigMap
        self.rv = 100
        self.compacted = 0
        self.conflicts = 0  # one-shot 409s on status writes
        self.status_writes = 0
        self.requests: list[tuple[str, str, str, dict[str, list[str]]]] = []  # writes: method, path, type, query
        self.cond = threading.Condition()

    # ---- store ------------------------------------------------------------------------

    def _record(self, plural: str, kind: str, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, plural, kind, json.loads(json.dumps(obj))))
        self.cond.notify_all()

    def compact(self) -> None:
        """Forget the history so far: every watch, open or resumed, from a version before now gets 410 Gone."""
        with self.cond:
            self.rv += 1
            self.compacted = self.rv
            self.history.clear()

    def invalid(self, plural: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """A 422 Status naming the field, as admission answers, or None for a valid object."""
        res = self.resources[plural]
        try:
            SchemaValidator(res.schema).validate(obj)
        except jsonschema.ValidationError as exc:
            path = ".".join(str(p) for p in exc.absolute_path)
            name = (obj.get("metadata") or {}).get("name")
            return status(422, "Invalid", f'{res.kind} "{name}" is invalid: {path}: {exc.message}')
        return None

    def create(
        self, plural: str, ns: str, obj: dict[str, Any], *, manager: str = "", applied: bool = False
    ) -> tuple[int, dict[str, Any]]:
        res = self.resources[plural]
        problem = self.invalid(plural, obj)
        if problem:
            return 422, problem
        with self.cond:
            name = obj["metadata"]["name"]
            if (plural, ns, name) in self.objects:
                return 409, status(409, "AlreadyExists", f'{plural}.{res.group} "{name}" already exists')
            obj = prune_object(res.schema, json.loads(json.dumps(obj)))
            obj.pop("status", None)  # a resource with a status subresource ignores status on create
            obj["apiVersion"] = res.api_version
            obj["kind"] = res.kind
            obj["metadata"].pop("resourceVersion", None)
            obj["metadata"].update(uid=str(uuid.uuid4()), generation=1, creationTimestamp=_now())
            if res.namespaced:
                obj["metadata"]["namespace"] = ns
            if applied:
                obj, _ = kube_apply.apply(obj, obj, manager, force=True, subresource=None)
            elif manager:
                obj = kube_apply.record_update({"metadata": {}}, obj, manager, subresource=None)
            self.objects[(plural, ns, name)] = obj
            self._record(plural, "ADDED", obj)
            return 201, obj

    def server_side_apply(
        self, plural: str, ns: str, name: str, body: Any, *, manager: str, force: bool, subresource: str | None
    ) -> tuple[int, Any]:
        res = self.resources[plural]
        if not manager:
            return 400, status(400, "BadRequest", "PATCH with apply requires a fieldManager")
        if (
            not isinstance(body, dict)
            or body.get("kind") != res.kind
            or (body.get("metadata") or {}).get("name") != name
        ):
            return 400, status(400, "BadRequest", "apply needs apiVersion, kind and metadata.name of the object")
        with self.cond:
            old = self.objects.get((plural, ns, name))
            if old is None:
                if subresource:
                    return 404, status(404, "NotFound", f'{plural}.{res.group} "{name}" not found')
                return self.create(plural, ns, body, manager=manager, applied=True)
            want = body.get("metadata") or {}
            if want.get("resourceVersion") not in (None, old["metadata"]["resourceVersion"]):
                return 409, self._conflict(plural, name)
            if want.get("uid") not in (None, old["metadata"]["uid"]):
                return 409, status(409, "Conflict", f"Precondition failed: UID in precondition: {want['uid']}")
            if subresource == "status":
                self.status_writes += 1
                if self.conflicts:
                    self.conflicts -= 1
                    return 409, self._conflict(plural, name)
            new, conflicts = kube_apply.apply(old, body, manager, force=force, subresource=subresource)
            if conflicts:
                return 409, status(
                    409, "Conflict", f"Apply failed with {len(conflicts)} conflicts: {'; '.join(conflicts)}"
                )
            return self._store(plural, ns, name, old, new)

    def _store(self, plural: str, ns: str, name: str, old: dict[str, Any], new: dict[str, Any]) -> tuple[int, Any]:
        """Validate and keep `new`, as every write ends (the caller holds the lock)."""
        problem = self.invalid(plural, new)
        if problem:
            return 422, problem
        new = prune_object(self.resources[plural].schema, new)
        if new.get("spec") != old.get("spec"):
            new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.objects[(plural, ns, name)]
            self._record(plural, "DELETED", new)
            return 200, new
        self.objects[(plural, ns, name)] = new
        self._record(plural, "MODIFIED", new)
        return 200, new

    def update(
        self, plural: str, ns: str, name: str, change: Any, *, subresource: str | None, replace: bool, manager: str = ""
    ) -> tuple[int, Any]:
        with self.cond:
            old = self.objects.get((plural, ns, name))
            if old is None:
                return 404, status(404, "NotFound", f'{plural}.{self.resources[plural].group} "{name}" not found')
            want_rv = (change.get("metadata") or {}).get("resourceVersion") if isinstance(change, dict) else None
            if want_rv is not None and want_rv != old["metadata"]["resourceVersion"]:
                return 409, self._conflict(plural, name)
            if subresource == "status":
                self.status_writes += 1
                if self.conflicts:
                    self.conflicts -= 1
                    return 409, self._conflict(plural, name)
                new = json.loads(json.dumps(old))
                new["status"] = change.get("status") if replace else _merge(old.get("status"), change.get("status"))
            else:
                new = _merge(old, change) if not replace else {**change, "status": old.get("status")}
                new["metadata"] = {
                    **old["metadata"],
                    **{
                        k: v
                        for k, v in (new.get("metadata") or {}).items()
                        if k in ("labels", "annotations", "finalizers")
                    },
                }
            new = kube_apply.record_update(old, new, manager or "unknown", subresource=subresource)
            return self._store(plural, ns, name, old, new)

    def _conflict(self, plural: str, name: str) -> dict[str, Any]:
        return status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {plural}.{self.resources[plural].group} "{name}": '
            "the object has been modified; "
            "please apply your changes to the latest version and try again",
        )

    def delete(self, plural: str, ns: str, name: str) -> tuple[int, Any]:
        with self.cond:
            obj = self.objects.get((plural, ns, name))
            if obj is None:
                return 404, status(404, "NotFound", f'{plural}.{self.resources[plural].group} "{name}" not found')
            if obj["metadata"].get("finalizers"):
                obj["metadata"].setdefault("deletionTimestamp", _now())
                self._record(plural, "MODIFIED", obj)
                return 200, obj
            del self.objects[(plural, ns, name)]
            self._record(plural, "DELETED", obj)
            return 200, obj

    def listing(self, plural: str, ns: str | None) -> dict[str, Any]:
        with self.cond:
            items = [o for (p, n, _), o in sorted(self.objects.items()) if p == plural and (ns is None or n == ns)]
            res = self.resources[plural]
            return {
                "apiVersion": res.api_version,
                "kind": f"{res.kind}List",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": json.loads(json.dumps(items)),
            }

    def watch(self, plural: str, ns: str | None, since: int, timeout_s: float) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        seen = since
        with self.cond:
            if since < self.compacted:
                yield {
                    "type": "ERROR",
                    "object": status(410, "Expired", f"too old resource version: {since} ({self.compacted})"),
                }
                return
        while time.monotonic() < deadline:
            with self.cond:
                if seen < self.compacted:
                    yield {
                        "type": "ERROR",
                        "object": status(410, "Expired", f"too old resource version: {seen} ({self.compacted})"),
                    }
                    return
                batch = [
                    (rv, t, o)
                    for rv, p, t, o in self.history
                    if rv > seen and p == plural and (ns is None or o["metadata"].get("namespace") == ns)
                ]
                if not batch:
                    self.cond.wait(min(0.2, max(0.0, deadline - time.monotonic())))
                    continue
            for rv, t, o in batch:
                seen = rv
                yield {"type": t, "object": o}


class _Handler(BaseHTTPRequestHandler):
    crs: FakeCustomResources

    def _send(self, code: int, doc: Any) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _serve(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0]
        body = (yaml.safe_load(raw) if ctype == APPLY else json.loads(raw)) if raw else None
        parts = url.path.strip("/").split("/")
        if self.command != "GET":
            with self.crs.cond:
                self.crs.requests.append((self.command, url.path, ctype, query))
        if parts[:2] == ["api", "v1"] and len(parts) == 5 and parts[4] == "events" and self.command == "POST":
            with self.crs.cond:
                self.crs.events.append(body)
            return self._send(201, body)
        if parts[:2] == ["api", "v1"] and len(parts) == 6 and parts[4] == "configmaps" and self.command == "GET":
            cm = self.crs.configmaps.get((parts[3], parts[5]))
            return (
                self._send(200, cm)
                if cm
                else self._send(404, status(404, "NotFound", f'configmaps "{parts[5]}" not found'))
            )
        if parts[:1] == ["apis"] and len(parts) <= 2 and self.command == "GET":
            return self._discovery(parts[1] if len(parts) == 2 else None)
        if parts[:1] != ["apis"] or len(parts) < 4:
            return self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
        group, version, rest = parts[1], parts[2], parts[3:]
        ns = None
        if rest[:1] == ["namespaces"] and len(rest) > 2:
            ns, rest = rest[1], rest[2:]
        plural, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
        res = self.crs.resources.get(plural)
        cluster_wide = ns is None and (name is None and self.command == "GET")  # a list or watch of every namespace
        if (
            res is None
            or res.group != group
            or version not in res.versions
            or (ns is not None and not res.namespaced)
            or (res.namespaced and ns is None and not cluster_wide)
        ):
            return self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
        key_ns = ns or ""
        if self.command == "GET" and name is None and query.get("watch", ["false"])[0] == "true":
            return self._stream(plural, ns, query)
        if self.command == "GET" and name is None:
            return self._send(200, self.crs.listing(plural, ns))
        manager = (query.get("fieldManager") or [""])[0]
        if self.command == "POST" and name is None and (ns or not res.namespaced):
            return self._send(*self.crs.create(plural, key_ns, body, manager=manager or "unknown"))
        if name is None:
            return self._send(405, status(405, "MethodNotAllowed", "method not allowed"))
        if self.command == "GET":
            with self.crs.cond:
                obj = self.crs.objects.get((plural, key_ns, name))
            return self._send(200, obj) if obj else self._send(404, status(404, "NotFound", f'"{name}" not found'))
        if self.command == "PATCH" and ctype == APPLY:
            force = (query.get("force") or ["false"])[0].lower() == "true"
            return self._send(
                *self.crs.server_side_apply(plural, key_ns, name, body, manager=manager, force=force, subresource=sub)
            )
        if self.command in ("PUT", "PATCH"):
            if self.command == "PATCH" and ctype != "application/merge-patch+json":
                return self._send(415, status(415, "UnsupportedMediaType", f"unsupported patch type {ctype}"))
            return self._send(
                *self.crs.update(
                    plural, key_ns, name, body, subresource=sub, replace=self.command == "PUT", manager=manager
                )
            )
        if self.command == "DELETE":
            return self._send(*self.crs.delete(plural, key_ns, name))
        return self._send(405, status(405, "MethodNotAllowed", "method not allowed"))

    def _discovery(self, group: str | None) -> None:
        """`/apis` (APIGroupList) or `/apis/<group>` (APIGroup): the served versions of each group's
        resources; preferred is the highest by Kubernetes' version order, as for CRDs."""
        served: dict[str, set[str]] = {}
        for res in self.crs.resources.values():
            served.setdefault(res.group, set()).update(res.versions)

        def doc(name: str) -> dict[str, Any]:
            ordered = sorted(served[name], key=_version_priority, reverse=True)
            versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": name,
                "versions": versions,
                "preferredVersion": versions[0],
            }

        if group is None:
            return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [doc(g) for g in served]})
        if group not in served:
            return self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
        return self._send(200, doc(group))

    def _stream(self, plural: str, ns: str | None, query: dict[str, list[str]]) -> None:
        since = int((query.get("resourceVersion") or ["0"])[0] or 0)
        timeout = float((query.get("timeoutSeconds") or ["5"])[0])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in self.crs.watch(plural, ns, since, min(timeout, 5.0)):
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve_fake_crs(extra_crds: Iterable[dict[str, Any]] = ()) -> Iterator[tuple[FakeCustomResources, str]]:
    crs = FakeCustomResources(extra_crds)
    handler = type("Handler", (_Handler,), {"crs": crs, "protocol_version": "HTTP/1.1"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield crs, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
