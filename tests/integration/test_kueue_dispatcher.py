"""The MultiKueue external dispatcher against a local API server speaking the real wire format:
nomination order and rounds, the 10-cluster cap, residency, Kueue's field manager on the status
apply, re-nomination after a worker gives the Workload back, 409 retries, the watch loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes import client, config

from broker.integrations import kueue as kq
from broker.operator.kueue import KueueDispatcher
from tests.integration.kube_crd_fake import TEST_CRD_DIR, FakeCustomResources, load_crds, serve_fake_crs
from tests.integration.kube_fake import write_kubeconfig
from tests.integration.kueue_support import (
    NS,
    V,
    check,
    condition,
    create_workload,
    get,
    kueue_applies,
    owned_by,
    reserve_quota,
    set_up_multikueue,
)
from tests.unit.integrations.small_catalog import SITE_BY_ID, table

TABLE = table()
# 3 pods of 2 cores / 4 GiB cost 0.24 USD/h at iad, 0.27 at ams, 0.30 at fra, 0.33 at lon, 0.36 at fra-gcp
CLUSTERS = {
    "fra": "aws:eu-central-1",
    "ams": "azure:westeurope",
    "fra-gcp": "gcp:europe-west3",
    "iad": "aws:us-east-1",
    "lon": "aws:eu-west-2",
}
Cluster = tuple[FakeCustomResources, client.CustomObjectsApi, client.ApiClient]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with serve_fake_crs(load_crds([TEST_CRD_DIR / "kueue.yaml"])) as (crs, url):
        api = config.new_client_from_config(config_file=str(write_kubeconfig(tmp_path / "kc.yaml", url, "manager")))
        yield crs, client.CustomObjectsApi(api), api


def dispatcher(api: client.ApiClient, clock: Callable[[], float] = time.monotonic, **kw: Any) -> KueueDispatcher:
    return KueueDispatcher(api, lambda: (SITE_BY_ID, TABLE), clock=clock, round_s=60.0, **kw)


def nominated(objects: client.CustomObjectsApi, name: str) -> list[str]:
    return list(get(objects, name).get("status", {}).get("nominatedClusterNames") or [])


def test_the_test_crds_are_valid_structural_crds() -> None:
    for path in sorted(TEST_CRD_DIR.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            kubernetes_validate.validate(crd, "1.31", strict=True)


def test_the_cheapest_cluster_first_then_one_more_per_round(cluster: Cluster) -> None:
    crs, objects, api = cluster
    set_up_multikueue(objects, CLUSTERS)
    create_workload(objects, "train")
    reserve_quota(objects, "train")
    clock = Clock()
    d = dispatcher(api, clock)
    d.resync()
    assert nominated(objects, "train") == ["iad"]
    clock.t += 30  # the round is not over
    d.tick()
    assert nominated(objects, "train") == ["iad"]
    clock.t += 31
    d.tick()
    assert nominated(objects, "train") == ["iad", "ams"]
    clock.t += 61
    d.tick()
    assert nominated(objects, "train") == ["iad", "ams", "fra"]

    # the write: a forced server-side apply of the status subresource under Kueue's manager
    writes = [r for r in crs.requests if r[1].endswith("/workloads/train/status") and "kueue-admission" in str(r[3])]
    method, _, ctype, query = writes[-1]
    assert (method, ctype) == ("PATCH", "application/apply-patch+yaml")
    assert query["fieldManager"] == ["kueue-admission"] and query["force"] == ["true"]
    wl = get(objects, "train")
    assert "f:nominatedClusterNames" in owned_by(wl, kq.FIELD_MANAGER)["f:status"]
    # and Kueue's admission is untouched
    assert wl["status"]["admission"]["clusterQueue"] == "cq"
    assert wl["status"]["admissionChecks"][0]["state"] == "Pending"
    assert [c["type"] for c in wl["status"]["conditions"]] == ["QuotaReserved"]
    events = [e for e in crs.events if e["reason"] == "Nominated"]
    assert "iad (0.24 USD/h)" in events[0]["message"]
    assert events[0]["involvedObject"]["kind"] == "Workload"


def test_kueue_can_clear_a_nomination_written_under_its_field_manager(cluster: Cluster) -> None:
    _, objects, api = cluster
    set_up_multikueue(objects, CLUSTERS)
    create_workload(objects, "train")
    reserve_quota(objects, "train")
    dispatcher(api, Clock(), step=2).resync()
    assert nominated(objects, "train") == ["iad", "ams"]
    # ams admits it: Kueue sets clusterName and leaves the nomination out of its apply
    admitted = {k: v for k, v in get(objects, "train")["status"].items() if k != "nominatedClusterNames"}
    kueue_applies(objects, "train", {**admitted, "clusterName": "ams"})
    after = get(objects, "train")["status"]
    assert after["clusterName"] == "ams" and "nominatedClusterNames" not in after


def test_a_nomination_under_another_manager_outlives_kueues_apply(cluster: Cluster) -> None:
    """Why the field manager matters: a merge patch under another name co-owns the field, so
    Kueue's apply without it cannot remove it (Kueue then fails to admit: clusterName and
    nominatedClusterNames are mutually exclusive)."""
    _, objects, _ = cluster
    set_up_multikueue(objects, CLUSTERS)
    create_workload(objects, "train")
    status = reserve_quota(objects, "train")["status"]
    objects.patch_namespaced_custom_object_status(
        kq.GROUP, V, NS, "workloads", "train", {"status": {"nominatedClusterNames": ["ams"]}}, field_manager="naive"
    )
    kueue_applies(objects, "train", {**status, "clusterName": "ams"})
    assert get(objects, "train")["status"]["nominatedClusterNames"] == ["ams"]


def test_at_most_ten_clusters(cluster: Cluster) -> None:
    _, objects, api = cluster
    many = {f"w{i:02d}": site for i, site in enumerate(list(CLUSTERS.values()) * 3)}
    set_up_multikueue(objects, many)
    create_workload(objects, "train")
    reserve_quota(objects, "train")
    dispatcher(api, Clock(), step=10).resync()
    names = nominated(objects, "train")
    assert len(names) == 10
    costs = {"aws:us-east-1": 0.24, "azure:westeurope": 0.27, "aws:eu-central-1": 0.30, "aws:eu-west-2": 0.33}
    assert [costs[many[n]] for n in names] == sorted(costs[many[n]] for n in names)  # the ten cheapest
    assert not {n for n in names if many[n] == "gcp:europe-west3"}


def test_residency_keeps_workloads_in_their_jurisdiction(cluster: Cluster) -> None:
    _, objects, api = cluster
    set_up_multikueue(objects, {**CLUSTERS, "onprem": None})
    create_workload(objects, "eu", **{kq.RESIDENCY_ANNOTATION: "gdpr-eu"})
    create_workload(objects, "any")
    reserve_quota(objects, "eu")
    reserve_quota(objects, "any")
    dispatcher(api, Clock(), step=10).resync()
    assert nominated(objects, "eu") == ["ams", "fra", "fra-gcp"]
    assert nominated(objects, "any") == ["iad", "ams", "fra", "lon", "fra-gcp", "onprem"]


def test_a_worker_that_gives_the_workload_back_is_not_nominated_again(cluster: Cluster) -> None:
    crs, objects, api = cluster
    set_up_multikueue(objects, CLUSTERS)
    create_workload(objects, "train")
    reserve_quota(objects, "train")
    clock = Clock()
    d = dispatcher(api, clock)
    d.resync()
    assert nominated(objects, "train") == ["iad"]
    status = get(objects, "train")["status"]
    # iad admits it; Kueue marks the check Ready, sets clusterName and drops the nomination
    status.pop("nominatedClusterNames")
    admitted = {**status, "clusterName": "iad", "admissionChecks": [check("Ready")]}
    d.reconcile(kueue_applies(objects, "train", admitted))
    # iad evicts it: the MultiKueue check goes Retry while clusterName still names iad ...
    retry = {**admitted, "admissionChecks": [check("Retry", 'Workload evicted on worker cluster: "iad"')]}
    d.reconcile(kueue_applies(objects, "train", retry))
    assert get(objects, "train")["metadata"]["annotations"][kq.REJECTED_ANNOTATION] == "iad"
    # ... then Kueue evicts it on the manager, requeues it and reserves quota again
    evicted = condition("Evicted", reason="AdmissionCheck", message="Evicted due to AdmissionCheck in Retry state")
    requeued = {**status, "admissionChecks": [check("Pending")]}
    requeued["conditions"] = [*status["conditions"], evicted]
    d.reconcile(kueue_applies(objects, "train", requeued))
    assert nominated(objects, "train") == ["ams"]
    assert any(e["reason"] == "Rejected" and "iad" in e["message"] for e in crs.events)


def test_a_cluster_that_goes_inactive_is_replaced_once_the_objects_are_read_again(cluster: Cluster) -> None:
    crs, objects, api = cluster
    set_up_multikueue(objects, {"fra": "aws:eu-central-1", "iad": "aws:us-east-1"})
    create_workload(objects, "train")
    reserve_quota(objects, "train")
    clock = Clock()
    d = dispatcher(api, clock, topology_ttl_s=30.0)
    d.resync()
    assert nominated(objects, "train") == ["iad"]
    disconnected = {"conditions": [condition("Active", "False", "ClientConnectionFailed")]}
    objects.patch_cluster_custom_object_status(
        kq.GROUP,
        V,
        "multikueueclusters",
        "iad",
        {
            "apiVersion": f"{kq.GROUP}/{V}",
            "kind": "MultiKueueCluster",
            "metadata": {"name": "iad"},
            "status": disconnected,
        },
        field_manager="kueue",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    d.tick()  # the objects were read less than 30 s ago
    assert nominated(objects, "train") == ["iad"]
    clock.t += 31
    d.tick()
    assert nominated(objects, "train") == ["fra"]
    # and when nothing qualifies, the nomination is withdrawn
    objects.delete_cluster_custom_object(kq.GROUP, V, "multikueueclusters", "fra")
    clock.t += 31
    d.tick()
    assert nominated(objects, "train") == []
    assert crs.events[-1]["reason"] == "NoWorkerCluster"


def test_a_conflicting_status_write_is_retried_on_the_fresh_object(cluster: Cluster) -> None:
    crs, objects, api = cluster
    set_up_multikueue(objects, CLUSTERS)
    create_workload(objects, "train")
    reserve_quota(objects, "train")
    before = crs.status_writes
    crs.conflicts = 1
    dispatcher(api, Clock()).resync()
    assert nominated(objects, "train") == ["iad"]
    assert crs.status_writes - before == 2


def test_workloads_without_a_multikueue_check_or_quota_are_left_alone(cluster: Cluster) -> None:
    _, objects, api = cluster
    set_up_multikueue(objects, CLUSTERS)
    create_workload(objects, "local")
    kueue_applies(objects, "local", {"conditions": [condition("QuotaReserved")], "admissionChecks": []})
    create_workload(objects, "queued")
    kueue_applies(objects, "queued", {"admissionChecks": [check("Pending")]})
    dispatcher(api, Clock()).resync()
    assert nominated(objects, "local") == [] and nominated(objects, "queued") == []


def test_the_loop_follows_the_watch_and_lists_again_after_410(cluster: Cluster) -> None:
    crs, objects, api = cluster
    set_up_multikueue(objects, CLUSTERS)
    d = dispatcher(api, watch_timeout_s=2)
    stop = threading.Event()
    thread = threading.Thread(target=d.run, args=(stop,), daemon=True)
    thread.start()
    try:
        create_workload(objects, "first")
        reserve_quota(objects, "first")
        wait_for(lambda: nominated(objects, "first") == ["iad"])
        relists = d.relists
        crs.compact()  # the version the watch resumes from is gone
        create_workload(objects, "second", **{kq.RESIDENCY_ANNOTATION: "gdpr-eu"})
        reserve_quota(objects, "second")
        wait_for(lambda: nominated(objects, "second") == ["ams"])
        assert d.relists > relists
    finally:
        stop.set()
        thread.join(timeout=10)


def wait_for(ok: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)
