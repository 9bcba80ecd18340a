"""The Kubernetes deployment (deploy/kubernetes, kustomize base) and the CRDs: every manifest
strictly schema-valid, the kustomization complete, the operator's RBAC no wider than it needs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE = DEPLOY / "kubernetes"


def _resources(folder: Path) -> list[Path]:
    """The manifest files a kustomization builds from, following folders it lists (bases)."""
    out: list[Path] = []
    for rel in yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]:
        path = (folder / rel).resolve()
        out += _resources(path) if path.is_dir() else [path]
    return out


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in _resources(BASE):
        out += [(f"{path.name}#{i}", d) for i, d in enumerate(yaml.safe_load_all(path.read_text())) if d]
    return out


def test_the_kustomization_lists_every_manifest_of_the_base() -> None:
    listed = set(_resources(BASE))
    present = {p.resolve() for p in [*BASE.glob("*.yaml"), *(DEPLOY / "crds").glob("*.yaml")]}
    assert present - {BASE / "kustomization.yaml", DEPLOY / "crds" / "kustomization.yaml"} <= listed
    assert all(p.exists() for p in listed)


@pytest.mark.parametrize("folder", sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml")), ids=lambda p: p.name)
def test_kustomize_can_load_every_resource(folder: Path) -> None:
    """kustomize refuses a file outside the kustomization's folder ("security; file ... is not
    in or below ..."): a resource there must be a folder with a kustomization of its own."""
    for rel in yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]:
        path = (folder / rel).resolve()
        inside = path.is_relative_to(folder.resolve())
        assert inside or (path / "kustomization.yaml").exists(), f"{folder.name}: kustomize cannot load {rel}"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_builds_the_base() -> None:
    built = subprocess.run(["kubectl", "kustomize", str(BASE)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(built.stdout) if d)
    assert kinds == sorted(d["kind"] for _, d in _docs())


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
