"""Dispatch over REST (clusters, dispatch, replan, Alertmanager webhook) and the CLI commands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.app import Broker
from broker.cli.main import app as cli
from tests.integration.dispatch_support import (
    EXAMPLES,
    committed_docs,
    new_repo,
    replicas_by_workload,
    store_checkout,
    stored_document,
)
from tests.integration.kube_fake import write_kubeconfig

PROBLEM = "application/problem+json"
pytestmark = pytest.mark.usefixtures("server_roots")


def _register(client: TestClient, repo: Path, sites: set[str]) -> dict[str, str]:
    names = {}
    for i, site in enumerate(sorted(sites)):
        r = client.post(
            "/v1/clusters", json={"name": f"c{i}", "site": site, "gitops_dir": str(repo), "namespace": "shop"}
        )
        assert r.status_code == 201, r.text
        assert r.headers["location"] == f"/v1/clusters/c{i}"
        names[site] = f"c{i}"
    return names


@pytest.mark.parametrize(
    ("body", "status", "loc"),
    [
        ({"name": "x", "site": "aws:nowhere-1", "gitops_dir": "."}, 422, ["body", "site"]),
        ({"name": "Bad_Name", "site": "aws:eu-central-1", "gitops_dir": "."}, 422, ["body", "name"]),
        ({"name": "x", "site": "aws:eu-central-1"}, 422, ["body"]),
        ({"name": "x", "site": "aws:eu-central-1", "gitops_dir": ".", "kubeconfig": "k"}, 422, ["body"]),
        ({"name": "x", "site": "aws:eu-central-1", "kubeconfig": "/nonexistent/kc"}, 422, ["body", "kubeconfig"]),
        ({"name": "x", "site": "aws:eu-central-1", "gitops_dir": "/nonexistent/repo"}, 422, ["body", "gitops_dir"]),
    ],
)
def test_bad_cluster_registrations(client: TestClient, body: dict[str, str], status: int, loc: list[str]) -> None:
    r = client.post("/v1/clusters", json=body)
    assert r.status_code == status and r.headers["content-type"] == PROBLEM
    assert r.json()["errors"][0]["loc"][: len(loc)] == loc
    assert client.get("/v1/clusters").json() == []


@pytest.mark.both_backends
def test_cluster_registry_crud(client: TestClient, tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "fleet")
    kc = write_kubeconfig(tmp_path / "kc.yaml", "http://127.0.0.1:9", context="prod")
    assert (
        client.post("/v1/clusters", json={"name": "g", "site": "aws:eu-central-1", "gitops_dir": str(repo)}).status_code
        == 201
    )
    r = client.post(
        "/v1/clusters", json={"name": "k", "site": "gcp:europe-west1", "kubeconfig": str(kc), "context": "prod"}
    )
    assert r.status_code == 201 and r.json()["kind"] == "kubernetes"
    bad_ctx = client.post(
        "/v1/clusters", json={"name": "k2", "site": "gcp:europe-west1", "kubeconfig": str(kc), "context": "nope"}
    )
    assert bad_ctx.status_code == 422 and "prod" in bad_ctx.json()["detail"]
    assert (
        client.post("/v1/clusters", json={"name": "g", "site": "aws:eu-central-1", "gitops_dir": str(repo)}).status_code
        == 409
    )
    assert [c["name"] for c in client.get("/v1/clusters").json()] == ["g", "k"]
    assert client.get("/v1/clusters/g").json()["gitops_dir"] == str(repo)
    assert client.delete("/v1/clusters/g").status_code == 204
    assert client.delete("/v1/clusters/g").status_code == 404
    assert client.get("/v1/clusters/g").status_code == 404


@pytest.mark.both_backends
def test_dispatch_over_rest_dry_run_apply_status_and_failure(
    client: TestClient, broker: Broker, tmp_path: Path
) -> None:
    placement = store_checkout(broker)
    pid = placement["id"]
    repo = new_repo(tmp_path / "fleet")
    assert client.post(f"/v1/placements/{pid}/dispatch").status_code == 422  # no clusters yet
    _register(client, repo, {a["site"] for a in placement["assignments"]})

    dry = client.post(f"/v1/placements/{pid}/dispatch", json={"dry_run": True}).json()
    assert dry["state"] == "planned" and dry["replicas"] == replicas_by_workload(placement["assignments"])
    assert client.get(f"/v1/placements/{pid}/dispatch").status_code == 404  # a dry run records nothing

    doc = client.post(
        f"/v1/placements/{pid}/dispatch", json={"images": {"checkout-api": "ghcr.io/acme/checkout:1"}}
    ).json()
    assert doc["state"] == "applied"
    assert client.get(f"/v1/placements/{pid}/dispatch").json() == doc
    assert client.get(f"/v1/dispatches/{doc['id']}").json()["id"] == doc["id"]
    images = {
        c["image"]
        for docs in committed_docs(repo).values()
        for d in docs
        if d["kind"] == "Deployment" and d["metadata"]["name"].startswith("checkout-api")
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert images == {"ghcr.io/acme/checkout:1"}

    # the repository disappears: a 502 problem that carries the dispatch record
    other = client.post(f"/v1/placements/{pid}/replan", json={"replicas": {"orders-db": 3}}).json()
    moved_to = {a["site"] for a in stored_document(broker, other["new_placement_id"])["assignments"]}
    for i, site in enumerate(sorted(moved_to - {a["site"] for a in placement["assignments"]})):
        # the replan may use a site the first placement did not (it follows the catalog's latency figures)
        body = {"name": f"n{i}", "site": site, "gitops_dir": str(repo), "namespace": "shop"}
        assert client.post("/v1/clusters", json=body).status_code == 201
    shutil.rmtree(repo)
    r = client.post(f"/v1/placements/{other['new_placement_id']}/dispatch")
    assert r.status_code == 502 and r.headers["content-type"] == PROBLEM
    body = r.json()
    assert body["dispatch"]["state"] == "failed" and "does not exist" in body["detail"]
    assert client.get(f"/v1/placements/{other['new_placement_id']}/dispatch").json()["state"] == "failed"
    assert client.post("/v1/placements/pl_nope/dispatch").status_code == 404


def test_replan_and_alerts_over_rest(client: TestClient, broker: Broker) -> None:
    placement = store_checkout(broker)
    pid = placement["id"]
    site = placement["assignments"][0]["site"]
    bad = client.post(f"/v1/placements/{pid}/replan", json={"exclude_sites": ["aws:nowhere"], "replicas": {"ghost": 2}})
    assert bad.status_code == 422 and [e["loc"][1] for e in bad.json()["errors"]] == ["exclude_sites", "replicas"]
    assert client.post(f"/v1/placements/{pid}/replan", json={"traffic_steps": [50, 10]}).status_code == 422

    same = client.post(f"/v1/placements/{pid}/replan", json={"dry_run": True}).json()
    assert same["decision"] in ("unchanged", "keep") and same["new_placement_id"] is None

    alert = {
        "version": "4",
        "status": "firing",
        "receiver": "placement-broker",
        "alerts": [
            {"status": "firing", "labels": {"alertname": "SiteDown", "site": site}, "annotations": {}},
            {"status": "firing", "labels": {"alertname": "Watchdog"}, "annotations": {}},
        ],
    }
    out = client.post("/v1/alerts", json=alert).json()
    assert [i["alertname"] for i in out["ignored"]] == ["Watchdog"]
    (rp,) = out["replans"]
    assert rp["placement_id"] == pid and rp["decision"] == "migrate" and rp["reason"] == "site_failure"
    moved = stored_document(broker, rp["new_placement_id"])
    assert site not in {a["site"] for a in moved["assignments"]}
    stored = client.get(f"/v1/replans/{rp['id']}").json()
    assert stored["migration"]["moved_replicas"] == rp["migration"]["moved_replicas"] > 0
    steps = stored["migration"]["steps"]
    assert [s["traffic_pct"] for s in steps if s["action"] == "shift_traffic"][:3] == [10, 50, 100]


def test_cli_clusters_dispatch_and_replan(
    db_url: str, broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    runner = CliRunner()
    placement = store_checkout(broker)
    repo = new_repo(tmp_path / "fleet")
    for i, site in enumerate(sorted({a["site"] for a in placement["assignments"]})):
        r = runner.invoke(
            cli, ["clusters", "add", f"c{i}", "--site", site, "--gitops-dir", str(repo), "--namespace", "shop"]
        )
        assert r.exit_code == 0, r.output
    bad = runner.invoke(cli, ["clusters", "add", "x", "--site", "aws:nowhere-1", "--gitops-dir", str(repo)])
    assert bad.exit_code == 2 and "unknown site" in bad.output
    listed = json.loads(runner.invoke(cli, ["clusters", "list", "--json"]).stdout)
    assert [c["name"] for c in listed] == ["c0", "c1"]

    dry = runner.invoke(cli, ["dispatch", placement["id"], "--dry-run"])
    assert dry.exit_code == 0 and dry.stdout.count("kind: Deployment") == len(placement["assignments"])
    real = runner.invoke(cli, ["dispatch", placement["id"], "--json"])
    assert real.exit_code == 0 and json.loads(real.stdout)["state"] == "applied"
    assert runner.invoke(cli, ["dispatch", "pl_nope"]).exit_code == 2

    rp = runner.invoke(
        cli,
        ["replan", placement["id"], "--replicas", "checkout-api=9", "--disruption-budget", "2", "--json", "--dry-run"],
    )
    assert rp.exit_code == 0, rp.output
    doc = json.loads(rp.stdout)
    assert doc["decision"] == "migrate" and doc["migration"]["disruption_budget"] == 2
    assert runner.invoke(cli, ["clusters", "remove", "c0"]).exit_code == 0
    assert runner.invoke(cli, ["clusters", "remove", "c0"]).exit_code == 2


def test_cli_reaches_a_tenants_placement_with_tenant(
    db_url: str, broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A placement a tenant made through the API: `replan` and `dispatch` find it with --tenant
    (without it they look in the embedded tenant, `default`, and say it does not exist)."""
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    runner = CliRunner()
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    placement, stored = broker.place({**doc, "dry_run": False}, tenant="acme")
    assert stored and placement.id is not None
    sites = sorted({a.site for a in placement.result.assignments})
    repo = new_repo(tmp_path / "fleet")
    for i, site in enumerate(sites):
        add = ["clusters", "add", f"c{i}", "--site", site, "--gitops-dir", str(repo), "--tenant", "acme"]
        assert runner.invoke(cli, add).exit_code == 0
    replan = ["replan", placement.id, "--exclude-site", sites[0], "--dry-run", "--json"]
    assert runner.invoke(cli, replan).exit_code == 2  # not default's
    rp = runner.invoke(cli, [*replan, "--tenant", "acme"])
    assert rp.exit_code == 0, rp.output
    assert json.loads(rp.stdout)["decision"] == "migrate"
    dry = ["dispatch", placement.id, "--dry-run"]
    assert runner.invoke(cli, dry).exit_code == 2
    d = runner.invoke(cli, [*dry, "--tenant", "acme"])
    assert d.exit_code == 0 and "kind: Deployment" in d.stdout, d.output
    # the embedded `place` stores under --tenant too, and a bad name is a usage error
    request = tmp_path / "req.yaml"
    request.write_text(yaml.safe_dump({**doc, "name": "cli-acme", "dry_run": False}))
    placed = runner.invoke(cli, ["place", "-f", str(request), "--format", "json", "--tenant", "acme"])
    assert placed.exit_code == 0, placed.output
    assert broker.get_placement(json.loads(placed.stdout)["id"], tenant="acme").tenant == "acme"
    bad = runner.invoke(cli, [*replan, "--tenant", "Not A Tenant"])
    assert bad.exit_code == 2 and "invalid tenant name" in bad.output
    remote = runner.invoke(cli, ["place", "-f", str(request), "--server", "http://127.0.0.1:9", "--tenant", "acme"])
    assert remote.exit_code == 2 and "--tenant" in remote.output
