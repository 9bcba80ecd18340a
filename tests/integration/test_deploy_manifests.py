"""The Kubernetes deployment (deploy/kubernetes, kustomize base) and the CRDs: every manifest
strictly schema-valid, the kustomization complete, the operator's RBAC no wider than it needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE = DEPLOY / "kubernetes"


def _docs() -> list[tuple[str, dict[str, Any]]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    out = []
    for rel in kustomization["resources"]:
        path = (BASE / rel).resolve()
        out += [(f"{path.name}#{i}", d) for i, d in enumerate(yaml.safe_load_all(path.read_text())) if d]
    return out


def test_the_kustomization_lists_every_manifest_of_the_base() -> None:
    listed = {(BASE / r).resolve() for r in yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]}
    present = {p.resolve() for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert present <= listed
    assert all(p.exists() for p in listed)


@pytest.mark.parametrize(("where", "doc"), _docs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_manifest_is_strictly_valid(where: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, "1.31", strict=True)


def test_the_operator_may_touch_its_resources_and_events_only() -> None:
    role = next(d for _, d in _docs() if d["kind"] == "ClusterRole")
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    # what broker/operator/controller.py calls
    needed = {
        ("placement-broker.dev", "placementrequests", "get"),
        ("placement-broker.dev", "placementrequests", "list"),
        ("placement-broker.dev", "placementrequests", "watch"),
        ("placement-broker.dev", "placementrequests", "patch"),
        ("placement-broker.dev", "placementrequests/status", "get"),
        ("placement-broker.dev", "placementrequests/status", "update"),
        ("placement-broker.dev", "placementpolicies", "list"),
        ("", "events", "create"),
    }
    assert needed <= granted
    assert not {x for x in granted if x[2] in ("delete", "deletecollection", "*") or x[1] == "*"}
    wider = granted - needed - {("placement-broker.dev", "placementpolicies", v) for v in ("get", "watch")}
    assert wider == set()


def test_only_the_operator_mounts_a_service_account_token() -> None:
    pods = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for _, d in _docs() if d["kind"] == "Deployment"}
    assert set(pods) == {"placement-broker-api", "placement-broker-worker", "placement-broker-operator"}
    for name, spec in pods.items():
        mounts = spec.get("automountServiceAccountToken", True)
        assert mounts == (name == "placement-broker-operator"), name
        assert spec["securityContext"]["runAsNonRoot"] is True
