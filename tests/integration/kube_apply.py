"""Field ownership for the local API server (kube_crd_fake.py): server-side apply and managedFields.

What the real API server does, at the granularity the tests need:

* every write records which fields its manager owns, in `metadata.managedFields` entries keyed by
  (manager, operation, subresource), with `fieldsV1` in the server's `f:<name>` notation;
* an apply (`application/apply-patch+yaml`, `fieldManager` required) owns exactly the fields it
  sends: a field the same manager applied before and omits now is removed, unless another manager
  also owns it; a field another manager owns with a different value is a 409 conflict unless
  `force=true`, which takes the field over;
* an update (merge patch, PUT) takes over the fields whose values it changes.

Simplification: lists are atomic (the real server merges lists of listType=map per key); maps
recurse. The tests' lists are written whole by one manager at a time.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

Path = tuple[str, ...]
_MISSING = object()


def paths(doc: Any, prefix: Path = ()) -> set[Path]:
    """The leaf fields of a document: maps recurse, everything else (lists too) is one field."""
    if isinstance(doc, dict) and doc:
        out: set[Path] = set()
        for k, v in doc.items():
            if v is not None:
                out |= paths(v, (*prefix, k))
        return out
    return {prefix} if prefix else set()


def get(doc: Any, path: Path) -> Any:
    for p in path:
        if not isinstance(doc, dict) or p not in doc:
            return _MISSING
        doc = doc[p]
    return doc


def put(doc: dict[str, Any], path: Path, value: Any) -> None:
    for p in path[:-1]:
        if not isinstance(doc.get(p), dict):
            doc[p] = {}
        doc = doc[p]
    doc[path[-1]] = copy.deepcopy(value)


def drop(doc: dict[str, Any], path: Path) -> None:
    """Remove a field, and the maps it leaves empty."""
    parents = []
    node: Any = doc
    for p in path[:-1]:
        if not isinstance(node, dict) or p not in node:
            return
        parents.append((node, p))
        node = node[p]
    if isinstance(node, dict):
        node.pop(path[-1], None)
        for parent, key in reversed(parents):
            if parent[key] == {}:
                del parent[key]


def fields_v1(owned: Iterable[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(owned):
        node = out
        for p in path:
            node = node.setdefault(f"f:{p}", {})
    return out


def owned_paths(fv1: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for k, v in fv1.items():
        path = (*prefix, k[2:])
        out |= owned_paths(v, path) if v else {path}
    return out


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def scoped(doc: dict[str, Any], subresource: str | None) -> dict[str, Any]:
    """The part of a document a write to the resource or its status subresource may change."""
    if subresource == "status":
        return {"status": doc["status"]} if doc.get("status") is not None else {}
    meta = doc.get("metadata") or {}
    out = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    kept = {k: meta[k] for k in ("labels", "annotations", "finalizers") if meta.get(k) is not None}
    if kept:
        out["metadata"] = kept
    return out


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = obj.setdefault("metadata", {}).setdefault("managedFields", [])
    return entries


def _entry(obj: dict[str, Any], manager: str, operation: str, subresource: str | None) -> dict[str, Any]:
    for e in _entries(obj):
        if (e["manager"], e["operation"], e.get("subresource")) == (manager, operation, subresource):
            return e
    e = {"manager": manager, "operation": operation, "apiVersion": obj.get("apiVersion"), "fieldsType": "FieldsV1"}
    if subresource:
        e["subresource"] = subresource
    e["fieldsV1"] = {}
    _entries(obj).append(e)
    return e


def _stamp(entry: dict[str, Any], owned: set[Path]) -> None:
    entry["fieldsV1"] = fields_v1(owned)
    entry["time"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _disown(obj: dict[str, Any], keep: dict[str, Any], taken: set[Path]) -> None:
    for e in _entries(obj):
        if e is keep:
            continue
        mine = owned_paths(e.get("fieldsV1") or {})
        left = {p for p in mine if not any(_overlaps(p, t) for t in taken)}
        if left != mine:
            e["fieldsV1"] = fields_v1(left)
    obj["metadata"]["managedFields"] = [e for e in _entries(obj) if e is keep or e.get("fieldsV1")]


def apply(
    current: dict[str, Any], applied: dict[str, Any], manager: str, *, force: bool, subresource: str | None
) -> tuple[dict[str, Any], list[str]]:
    """(the object after the apply, conflicts). With conflicts the object is unchanged."""
    new = copy.deepcopy(current)
    want = scoped(applied, subresource)
    sent = paths(want)
    entry = _entry(new, manager, "Apply", subresource)
    conflicts: list[tuple[str, Path]] = []
    for e in _entries(new):
        if e is entry:
            continue
        for p in owned_paths(e.get("fieldsV1") or {}):
            for s in sent:
                if _overlaps(p, s) and get(new, s) != get(want, s):
                    conflicts.append((e["manager"], s))
    if conflicts and not force:
        return current, [f'conflict with "{m}": .{".".join(p)}' for m, p in sorted(set(conflicts))]
    others = set().union(*(owned_paths(e.get("fieldsV1") or {}) for e in _entries(new) if e is not entry))
    if conflicts:
        others -= {p for p in others if any(_overlaps(p, s) for _, s in conflicts)}
        _disown(new, entry, {s for _, s in conflicts})
    before = owned_paths(entry.get("fieldsV1") or {})
    for gone in sorted(before - sent, key=len, reverse=True):
        if not any(_overlaps(gone, o) for o in others) and not any(_overlaps(gone, s) for s in sent):
            drop(new, gone)
    for p in sent:
        put(new, p, get(want, p))
    _stamp(entry, sent)
    return new, []


def record_update(
    before: dict[str, Any], after: dict[str, Any], manager: str, *, subresource: str | None
) -> dict[str, Any]:
    """`after` with the fields the update changed owned by `manager` (taken from whoever had them)."""
    old, new = scoped(before, subresource), scoped(after, subresource)
    changed = {p for p in paths(new) if get(old, p) != get(new, p)}
    if not changed:
        return after
    entry = _entry(after, manager, "Update", subresource)
    _disown(after, entry, changed)
    _stamp(entry, owned_paths(entry.get("fieldsV1") or {}) | changed)
    return after
