"""Every `$ref` of the published schemas resolves: /openapi.json (OpenAPI 3.1, whose `#` references
resolve from the document's root as in JSON Schema 2020-12) and the CRDs the project ships or
tests against. openapi-spec-validator does not resolve references inside schemas; `referencing`
(jsonschema's resolver) does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from api.openapi_refs import hoist_embedded_defs

ROOT = Path(__file__).resolve().parents[2]
CRDS = sorted(
    p
    for p in [*(ROOT / "deploy" / "crds").glob("*.yaml"), *(ROOT / "tests" / "integration" / "crds").glob("*.yaml")]
    if p.name != "kustomization.yaml"
)


def _refs(node: Any, where: str = "#") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield where, value
            else:
                yield from _refs(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, f"{where}/{i}")


def unresolved(doc: dict[str, Any]) -> list[str]:
    """Each reference of `doc` that does not resolve from its root, as `where -> ref`."""
    uri = "urn:placement-broker:document"
    resolver = Registry().with_resource(uri, DRAFT202012.create_resource(doc)).resolver(base_uri=uri)
    bad = []
    for where, ref in _refs(doc):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            bad.append(f"{where} -> {ref}")
    return bad


def test_the_checker_finds_a_reference_into_an_embedded_defs() -> None:
    """The defect as it was: a request schema with its own `$defs`, referred to from the root."""
    doc = {
        "paths": {"/x": {"post": {"schema": {"$defs": {"A": {"type": "string"}}, "items": {"$ref": "#/$defs/A"}}}}},
        "components": {"schemas": {"B": {"type": "integer"}}},
    }
    assert unresolved(doc) == ["#/paths//x/post/schema/items -> #/$defs/A"]
    fixed = hoist_embedded_defs(doc)
    assert unresolved(fixed) == []
    assert fixed["components"]["schemas"] == {"B": {"type": "integer"}, "A": {"type": "string"}}
    assert "$defs" not in fixed["paths"]["/x"]["post"]["schema"]


def test_a_hoisted_definition_refers_to_the_others_where_they_went() -> None:
    doc = {
        "paths": {
            "/x": {
                "post": {
                    "schema": {
                        "$defs": {"A": {"items": {"$ref": "#/$defs/B"}}, "B": {"type": "string"}},
                        "$ref": "#/$defs/A",
                    }
                }
            }
        }
    }
    fixed = hoist_embedded_defs(doc)
    assert fixed["components"]["schemas"]["A"] == {"items": {"$ref": "#/components/schemas/B"}}
    assert unresolved(fixed) == []


def test_two_different_schemas_of_one_name_are_refused() -> None:
    doc = {
        "paths": {"/x": {"post": {"schema": {"$defs": {"A": {"type": "string"}}}}}},
        "components": {"schemas": {"A": {"type": "integer"}}},
    }
    with pytest.raises(ValueError, match="'A'"):
        hoist_embedded_defs(doc)


def test_every_reference_of_the_openapi_document_resolves(shared_client: TestClient) -> None:
    doc = shared_client.get("/openapi.json").json()
    refs = list(_refs(doc))
    assert len(refs) > 50  # the walk sees the document's references
    assert unresolved(doc) == []
    # the two request bodies that embedded their own `$defs`, now in components
    schemas = doc["components"]["schemas"]
    assert {"MeasurementIn", "UsageSampleIn"} <= set(schemas)
    body = doc["paths"]["/v1/latency/measurements"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["properties"]["measurements"]["items"] == {"$ref": "#/components/schemas/MeasurementIn"}
    assert "$defs" not in str(doc["paths"])


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_crd_schemas_resolve_every_reference(path: Path) -> None:
    for crd in yaml.safe_load_all(path.read_text()):
        for version in crd["spec"]["versions"]:
            assert unresolved(version["schema"]["openAPIV3Schema"]) == [], (path.name, version["name"])
