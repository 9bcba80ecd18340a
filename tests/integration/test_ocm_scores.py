"""AddOnPlacementScores published to a local hub API server speaking the real wire format: created
with their status through the status subresource, scaled from the broker's prices, idempotent;
and the CLI (`broker ocm publish`, `broker kueue-dispatcher --once`) on the real catalog."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes import client, config
from typer.testing import CliRunner

from broker.cli.main import app
from broker.integrations import kueue as kq
from broker.integrations import ocm
from broker.operator.ocm import ScorePublisher
from tests.integration.kube_crd_fake import TEST_CRD_DIR, FakeCustomResources, load_crds, serve_fake_crs
from tests.integration.kube_fake import write_kubeconfig
from tests.integration.kueue_support import create_workload, get, reserve_quota, set_up_multikueue
from tests.unit.integrations.small_catalog import table

TABLE = table()
DOCS = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "integrations"
runner = CliRunner()
Hub = tuple[FakeCustomResources, client.CustomObjectsApi, client.ApiClient, Path]


@pytest.fixture()
def hub(tmp_path: Path) -> Iterator[Hub]:
    crds = load_crds([TEST_CRD_DIR / "ocm.yaml", TEST_CRD_DIR / "kueue.yaml"])
    with serve_fake_crs(crds) as (crs, url):
        kubeconfig = write_kubeconfig(tmp_path / "kc.yaml", url, "hub")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        yield crs, client.CustomObjectsApi(api), api, kubeconfig


def managed_cluster(objects: client.CustomObjectsApi, name: str, site: str | None = None) -> None:
    meta: dict[str, Any] = {"name": name}
    if site:
        meta["annotations"] = {ocm.SITE_ANNOTATION: site}
    objects.create_cluster_custom_object(
        "cluster.open-cluster-management.io",
        "v1",
        "managedclusters",
        {
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": meta,
            "spec": {"hubAcceptsClient": True},
        },
    )


def score(objects: client.CustomObjectsApi, cluster: str) -> dict[str, Any]:
    out: dict[str, Any] = objects.get_namespaced_custom_object(
        ocm.GROUP, ocm.VERSION, cluster, ocm.PLURAL, ocm.RESOURCE_NAME
    )
    return out


def test_scores_are_published_with_their_status_and_republished_in_place(hub: Hub) -> None:
    crs, objects, api, _ = hub
    managed_cluster(objects, "fra", "aws:eu-central-1")
    managed_cluster(objects, "ams", "azure:westeurope")
    managed_cluster(objects, "fra-gcp")  # mapped below, by the broker's registered clusters
    managed_cluster(objects, "edge-7")  # no site anywhere
    publisher = ScorePublisher(api, lambda: TABLE, registered={"fra-gcp": "gcp:europe-west3"})
    result = publisher.publish()
    expected, _ = ocm.scores(
        TABLE, {"fra": "aws:eu-central-1", "ams": "azure:westeurope", "fra-gcp": "gcp:europe-west3"}
    )
    assert result.scores == expected
    assert any("edge-7" in n for n in result.notes)
    for cluster, items in expected.items():
        obj = score(objects, cluster)
        assert obj["metadata"]["namespace"] == cluster
        assert obj["status"]["scores"] == items
        until = datetime.strptime(obj["status"]["validUntil"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert timedelta(minutes=59) < until - datetime.now(UTC) <= timedelta(hours=1)
    # the status went through the status subresource, as a server-side apply
    status_writes = [r for r in crs.requests if r[1].endswith(f"/{ocm.PLURAL}/{ocm.RESOURCE_NAME}/status")]
    assert len(status_writes) == 3 and {r[2] for r in status_writes} == {"application/apply-patch+yaml"}
    assert {r[3]["fieldManager"][0] for r in status_writes} == {"placement-broker"}
    assert score(objects, "ams")["status"]["scores"][0] == {"name": "costPerCore", "value": 100}
    assert score(objects, "fra-gcp")["status"]["scores"] == [{"name": "costPerCore", "value": -100}]

    # publishing again rewrites the same objects, no duplicates
    again = publisher.publish()
    assert again.scores == expected
    assert len([k for k in crs.objects if k[0] == ocm.PLURAL]) == 3


def test_the_loop_publishes_again_until_stopped(hub: Hub) -> None:
    crs, objects, api, _ = hub
    managed_cluster(objects, "fra", "aws:eu-central-1")
    managed_cluster(objects, "ams", "azure:westeurope")
    stop = threading.Event()
    thread = threading.Thread(target=ScorePublisher(api, lambda: TABLE).run, args=(stop, 0.1), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while len([r for r in crs.requests if r[1].endswith("/status")]) < 6:  # three rounds of two clusters
            assert time.monotonic() < deadline, "the publisher did not publish again"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert len([k for k in crs.objects if k[0] == ocm.PLURAL]) == 2


def test_a_score_out_of_range_is_refused_by_the_schema(hub: Hub) -> None:
    """The test schema holds OCM's -100..100 bound: the fake would catch a scaling bug."""
    _, objects, api, _ = hub
    managed_cluster(objects, "fra", "aws:eu-central-1")
    ScorePublisher(api, lambda: TABLE).publish()
    with pytest.raises(client.ApiException) as err:
        objects.patch_namespaced_custom_object_status(
            ocm.GROUP,
            ocm.VERSION,
            "fra",
            ocm.PLURAL,
            ocm.RESOURCE_NAME,
            {"status": {"scores": [{"name": "costPerCore", "value": 101}]}},
        )
    assert err.value.status == 422


# ---- the CLI on the real catalog -----------------------------------------------------------


def test_broker_ocm_publish(env: str, hub: Hub) -> None:
    _, objects, _, kubeconfig = hub
    managed_cluster(objects, "fra", "aws:eu-central-1")
    managed_cluster(objects, "sao", "aws:sa-east-1")
    managed_cluster(objects, "iad")
    r = runner.invoke(app, ["ocm", "publish", "--kubeconfig", str(kubeconfig), "--cluster", "iad=aws:us-east-1"])
    assert r.exit_code == 0, r.output
    lines = {line.split("\t")[0]: line.split("\t") for line in r.stdout.splitlines()}
    assert set(lines) == {"fra", "sao", "iad"}
    values = {c: dict(re.findall(r"(\w+)=(-?\d+)", line[2])) for c, line in lines.items()}
    assert {v["costPerCore"] for v in values.values()} >= {"100", "-100"}  # three regions, three prices
    assert score(objects, "sao")["status"]["scores"]
    bad = runner.invoke(app, ["ocm", "publish", "--kubeconfig", str(kubeconfig), "--cluster", "iad"])
    assert bad.exit_code == 2 and "CLUSTER=SITE" in bad.output


def test_broker_kueue_dispatcher_once(env: str, hub: Hub) -> None:
    crs, objects, _, kubeconfig = hub
    set_up_multikueue(objects, {"fra": "aws:eu-central-1", "iad": "aws:us-east-1", "lon": "aws:eu-west-2"})
    create_workload(objects, "train", **{kq.RESIDENCY_ANNOTATION: "gdpr-eu"})
    reserve_quota(objects, "train")
    args = ["kueue-dispatcher", "--kubeconfig", str(kubeconfig), "--once"]

    # Kueue names another dispatcher: the broker refuses to fight it
    crs.configmaps[("kueue-system", "kueue-manager-config")] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {
            "controller_manager_config.yaml": (
                "multiKueue:\n  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental\n"
            )
        },
    }
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "multikueue-dispatcher-incremental" in r.output
    assert "nominatedClusterNames" not in get(objects, "train")["status"]

    crs.configmaps[("kueue-system", "kueue-manager-config")]["data"]["controller_manager_config.yaml"] = (
        f"multiKueue:\n  dispatcherName: {kq.DISPATCHER_NAME}\n"
    )
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert get(objects, "train")["status"]["nominatedClusterNames"] == ["fra"]  # the only EEA cluster


# ---- the docs and the RBAC ----------------------------------------------------------------


def _doc_yaml(heading: str) -> list[dict[str, Any]]:
    text = DOCS.read_text()
    section = text[text.index(heading) :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    blocks = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    return [d for b in blocks for d in yaml.safe_load_all(b) if d]


def test_the_documented_placement_reads_the_published_score() -> None:
    placement = next(d for d in _doc_yaml("## Open Cluster Management") if d["kind"] == "Placement")
    coordinates = [c["scoreCoordinate"] for c in placement["spec"]["prioritizerPolicy"]["configurations"]]
    addon = [c["addOn"] for c in coordinates if c["type"] == "AddOn"]
    assert {"resourceName": ocm.RESOURCE_NAME, "scoreName": "costPerCore"} in addon
    assert {a["scoreName"] for a in addon} <= set(ocm.SCORES)


@pytest.mark.parametrize("path", sorted(DEPLOY.glob("*.yaml")), ids=lambda p: p.name)
def test_the_integration_rbac_is_strictly_valid(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, "1.31", strict=True)


def _granted(path: Path) -> set[tuple[str, str, str]]:
    role = next(d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == "ClusterRole")
    return {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }


def test_the_dispatcher_may_do_what_it_calls_and_no_more() -> None:
    k = "kueue.x-k8s.io"
    needed = {(k, "workloads", v) for v in ("get", "list", "watch", "patch")} | {
        (k, "workloads/status", "patch"),
        (k, "admissionchecks", "list"),
        (k, "multikueueconfigs", "list"),
        (k, "multikueueclusters", "list"),
        ("", "events", "create"),
    }
    granted = _granted(DEPLOY / "kueue-dispatcher.yaml")
    assert needed == granted


def test_the_publisher_may_do_what_it_calls_and_no_more() -> None:
    o = "cluster.open-cluster-management.io"
    needed = {
        (o, "managedclusters", "list"),
        (o, "addonplacementscores", "create"),  # a server-side apply that creates the object
        (o, "addonplacementscores", "patch"),
        (o, "addonplacementscores/status", "patch"),
    }
    assert needed == _granted(DEPLOY / "ocm-publisher.yaml")
