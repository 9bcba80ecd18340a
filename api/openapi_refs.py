"""Schemas embedded in operations (an `openapi_extra` request body built by `model_json_schema()`)
carry their own `$defs` and refer to them as `#/$defs/Name`. In OpenAPI 3.1 a `#` reference
resolves from the document's root, where there is no `$defs`: such a reference resolves nowhere.
`hoist_embedded_defs` moves every embedded definition to `components/schemas` and points the
references there, as FastAPI does for the models it registers itself."""

from __future__ import annotations

from typing import Any

EMBEDDED = "#/$defs/"
COMPONENTS = "#/components/schemas/"


def _take_defs(node: Any, found: dict[str, Any]) -> None:
    """Remove every `$defs` below `node`, collecting the definitions by name."""
    if isinstance(node, dict):
        defs = node.pop("$defs", None)
        if isinstance(defs, dict):
            for name, schema in defs.items():
                if name in found and found[name] != schema:
                    raise ValueError(f"two different embedded schemas are both named {name!r}")
                found[name] = schema
        for value in node.values():
            _take_defs(value, found)
    elif isinstance(node, list):
        for value in node:
            _take_defs(value, found)


def _repoint(node: Any) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(EMBEDDED):
            node["$ref"] = COMPONENTS + ref.removeprefix(EMBEDDED)
        for value in node.values():
            _repoint(value)
    elif isinstance(node, list):
        for value in node:
            _repoint(value)


def hoist_embedded_defs(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (changed in place, and returned) with the `$defs` embedded under `paths` moved to
    `components/schemas`. A name FastAPI already registered must mean the same schema: two
    different ones would make one of the references wrong, so that is an error at build time."""
    found: dict[str, Any] = {}
    _take_defs(doc.get("paths", {}), found)
    if not found:
        return doc
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    _repoint(found)
    for name, schema in found.items():
        if name in schemas and schemas[name] != schema:
            raise ValueError(f"an embedded schema {name!r} differs from the component of that name")
        schemas[name] = schema
    _repoint(doc.get("paths", {}))
    return doc
