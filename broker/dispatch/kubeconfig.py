"""Checking a kubeconfig before it is stored: its shape, the context, and what a tenant's may hold.

Messages name the field and what is wrong with it and never quote the document:
a kubeconfig holds tokens and keys, and one read from a path must not become a
way to print a file of the server. (A file that is not a kubeconfig at all used
to answer with the Kubernetes client's `'str' object does not support item
assignment`.)

A tenant's kubeconfig (sent over the API) must be self-contained: credentials
inline (`token`, `*-data`, username/password), no `exec` or `auth-provider`
plugin (both run programs on the server) and no file references
(`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`: each
makes the server open a file of its own choosing). The operator's kubeconfig
files (CLI) may use all of these.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from broker.errors import InvalidRequest

MAX_BYTES = 256 * 1024
# file reference -> what to send instead
_FILE_REFS = {
    "cluster": {"certificate-authority": "certificate-authority-data"},
    "user": {"client-certificate": "client-certificate-data", "client-key": "client-key-data", "tokenFile": "token"},
}
_PLUGINS = ("exec", "auth-provider")
_INLINE = {
    "cluster": ("certificate-authority-data",),
    "user": ("client-certificate-data", "client-key-data"),
}


class KubeconfigProblems:
    """Collects [{"loc", "msg"}] under one field, raised together as one 422."""

    def __init__(self, loc: list[Any], what: str) -> None:
        self.loc, self.what = loc, what
        self.errors: list[dict[str, Any]] = []

    def add(self, path: list[Any], msg: str) -> None:
        self.errors.append({"loc": [*self.loc, *path], "msg": msg})

    def raise_if_any(self) -> None:
        if self.errors:
            first = self.errors[0]
            where = ".".join(str(p) for p in first["loc"][len(self.loc) :])
            raise InvalidRequest(
                f"{self.what} is not a usable kubeconfig: {where + ': ' if where else ''}{first['msg']}",
                errors=self.errors,
            )


def parse_text(text: str, loc: list[Any], what: str) -> Any:
    """YAML or JSON text to a document; a syntax error names the line, not the text."""
    if len(text.encode()) > MAX_BYTES:
        raise InvalidRequest(
            f"{what} is larger than {MAX_BYTES // 1024} KiB", errors=[{"loc": loc, "msg": "too large"}]
        )
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise InvalidRequest(
            f"{what} is not valid YAML or JSON{at}", errors=[{"loc": loc, "msg": f"not valid YAML or JSON{at}"}]
        ) from exc


def read_file(path: Path, loc: list[Any]) -> Any:
    """The operator's kubeconfig file, parsed (size-capped; binary or unreadable files are one message)."""
    what = f"kubeconfig {str(path)!r}"
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
        text = raw.decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRequest(
            f"{what} cannot be read as text ({type(exc).__name__})",
            errors=[{"loc": loc, "msg": "not a readable text file"}],
        ) from exc
    return parse_text(text, loc, what)


def _named(doc: Mapping[str, Any], key: str, inner: str, p: KubeconfigProblems) -> dict[str, dict[str, Any]]:
    """The `clusters`/`contexts`/`users` list as name -> its inner mapping."""
    items = doc.get(key)
    if not isinstance(items, list) or not items:
        p.add([key], f"must be a non-empty list of {{name, {inner}}} entries")
        return {}
    out: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            p.add([key, i, "name"], "every entry needs a name")
            continue
        body = item.get(inner)
        if not isinstance(body, dict):
            p.add([key, i, inner], f"must be a mapping (the {inner}'s settings)")
            continue
        out[item["name"]] = {"index": i, **body}
    return out


def check(doc: Any, context: str | None, loc: list[Any], *, what: str, self_contained: bool) -> str:
    """Raise InvalidRequest unless `doc` is a kubeconfig whose context can be used; returns that context.

    `self_contained`: the rules for a tenant's kubeconfig (no plugins, no file references).
    """
    p = KubeconfigProblems(loc, what)
    if not isinstance(doc, dict):
        p.add([], "expected a mapping with clusters, contexts and users (this is not a kubeconfig)")
        p.raise_if_any()
    clusters = _named(doc, "clusters", "cluster", p)
    contexts = _named(doc, "contexts", "context", p)
    users = _named(doc, "users", "user", p)
    p.raise_if_any()
    name = context if context is not None else doc.get("current-context")
    ctx_loc = [*loc[:-1], "context"]  # the request's own `context` field, beside the kubeconfig
    if not isinstance(name, str) or not name:
        raise InvalidRequest(
            f"{what} has no current-context; name one with `context`",
            errors=[{"loc": ctx_loc, "msg": "required: the kubeconfig has no current-context"}],
        )
    if name not in contexts:
        # the operator's own file may be quoted back to them; a tenant's document is not echoed
        known = f"it has {sorted(contexts)}" if not self_contained else f"{len(contexts)} context(s) in it"
        raise InvalidRequest(
            f"{what} has no context named {name!r} ({known})",
            errors=[{"loc": ctx_loc, "msg": f"no context named {name!r} in the kubeconfig"}],
        )
    ctx = contexts[name]
    at = ["contexts", ctx["index"], "context"]
    cluster, user = clusters.get(str(ctx.get("cluster"))), users.get(str(ctx.get("user")))
    if cluster is None:
        p.add([*at, "cluster"], "names no cluster of the kubeconfig's clusters list")
    if user is None:
        p.add([*at, "user"], "names no user of the kubeconfig's users list")
    if cluster is not None:
        _check_server(cluster, p)
    if self_contained:
        for part, entry in (("cluster", cluster), ("user", user)):
            if entry is not None:
                _check_self_contained(part, entry, p)
    p.raise_if_any()
    return name


def _check_server(cluster: dict[str, Any], p: KubeconfigProblems) -> None:
    at = ["clusters", cluster["index"], "cluster", "server"]
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        p.add(at, "the cluster has no server URL")
        return
    url = urlsplit(server)
    if url.scheme not in ("https", "http") or not url.hostname:
        p.add(at, "must be an http(s) URL with a host, e.g. https://api.example.com:6443")


def _check_self_contained(part: str, entry: dict[str, Any], p: KubeconfigProblems) -> None:
    at = [f"{part}s", entry["index"], part]
    if part == "user":
        for key in _PLUGINS:
            if key in entry:
                p.add([*at, key], "credential plugins run programs on the server; send a token or client certificate")
    for key, inline in _FILE_REFS[part].items():
        if key in entry:
            p.add([*at, key], f"a path on the server is not accepted over the API; send {inline} instead")
    for key in _INLINE[part]:
        value = entry.get(key)
        if value is None:
            continue
        try:
            ok = isinstance(value, str) and bool(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            ok = False
        if not ok:
            p.add([*at, key], "must be base64 (as `kubectl config view --raw --flatten` writes it)")
