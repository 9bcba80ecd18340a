"""Strict validation of manifests against the Kubernetes OpenAPI schema (kubernetes-validate).

Run before anything is written or applied, so a bad template fails the whole
dispatch up front instead of leaving some clusters updated and others not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import kubernetes_validate
from kubernetes_validate.utils import ValidationError as SchemaError

from broker.dispatch.manifests import PREFIX, ClusterBundle
from broker.errors import InvalidRequest

# The Kubernetes minor version whose schema manifests must satisfy; apps/v1 and
# core/v1 fields used here are stable across every supported release.
KUBERNETES_VERSION = "1.31"


def problems(doc: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> list[str]:
    """Human-readable schema violations of one manifest (empty when it is valid)."""
    if not isinstance(doc.get("apiVersion"), str) or not isinstance(doc.get("kind"), str):
        return ["(root): apiVersion and kind are required strings"]
    try:
        kubernetes_validate.validate(dict(doc), version, strict=True)
    except SchemaError as exc:
        path = ".".join(str(p) for p in exc.path) or "(root)"
        return [f"{path}: {exc.message}"]
    except kubernetes_validate.utils.SchemaNotFoundError as exc:
        return [f"no schema for {doc.get('apiVersion')}/{doc.get('kind')}: {exc}"]
    return []


def check_bundles(bundles: Sequence[ClusterBundle], version: str = KUBERNETES_VERSION) -> None:
    """Raise InvalidRequest naming every manifest that does not validate."""
    errors: list[dict[str, Any]] = []
    for b in bundles:
        for m in b.manifests:
            for msg in problems(m, version):
                workload = m.get("metadata", {}).get("annotations", {}).get(f"{PREFIX}/workload", "?")
                errors.append(
                    {
                        "loc": ["body", "templates", workload],
                        "msg": f"{b.cluster}/{m['metadata'].get('name')}: {msg}",
                    }
                )
    if errors:
        raise InvalidRequest(
            f"rendered manifests do not validate against the Kubernetes schema {version} (strict): {errors[0]['msg']}",
            errors=errors,
        )
