"""The Kueue API version the dispatcher speaks: what the cluster serves (API discovery), v1beta2
where served (Kueue v0.15+, its stored version; v1beta1 deprecated), else v1beta1; a forced
version stays. Against the local API server with Kueue's upstream CRDs (crds/kueue-upstream.yaml),
so every object the dispatcher and Kueue's side write is validated by the upstream schema."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from typer.testing import CliRunner

from broker.cli.main import app
from broker.integrations import kueue as kq
from broker.operator.kueue import KueueDispatcher, KueueNotServed, served_version
from tests.integration.kube_crd_fake import TEST_CRD_DIR, FakeCustomResources, load_crds, serve_fake_crs
from tests.integration.kube_fake import write_kubeconfig
from tests.integration.kueue_support import NS, create_workload, get, reserve_quota, set_up_multikueue
from tests.unit.integrations.small_catalog import SITE_BY_ID, table

UPSTREAM = load_crds([TEST_CRD_DIR / "kueue-upstream.yaml"])
TABLE = table()
CLUSTERS: dict[str, str | None] = {"fra": "aws:eu-central-1", "iad": "aws:us-east-1", "lon": "aws:eu-west-2"}
Served = tuple[FakeCustomResources, client.CustomObjectsApi, client.ApiClient, Path]


def serving(versions: set[str]) -> list[dict[str, Any]]:
    """Kueue's upstream CRDs cut down to `versions`: v1beta1 alone is Kueue v0.13/v0.14, v1beta2
    alone a Kueue that dropped v1beta1, both today's release (v1beta2 stored)."""
    out = []
    for crd in copy.deepcopy(UPSTREAM):
        kept = [v for v in crd["spec"]["versions"] if v["name"] in versions]
        if not any(v["storage"] for v in kept):
            kept[0]["storage"] = True
        crd["spec"]["versions"] = kept
        out.append(crd)
    return out


@pytest.fixture()
def upstream_crds() -> None:
    """The upstream file holds what the tests assume: both versions, v1beta2 stored, v1beta1 deprecated."""
    for crd in UPSTREAM:
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert set(versions) == {"v1beta1", "v1beta2"} and versions["v1beta2"]["storage"]
        assert versions["v1beta1"].get("deprecated") or crd["spec"]["names"]["kind"] == "MultiKueueConfig"


@pytest.fixture(params=[("v1beta2",), ("v1beta1",), ("v1beta1", "v1beta2")], ids=lambda p: "+".join(p))
def served(request: pytest.FixtureRequest, tmp_path: Path, upstream_crds: None) -> Iterator[Served]:
    with serve_fake_crs(serving(set(request.param))) as (crs, url):
        kubeconfig = write_kubeconfig(tmp_path / "kc.yaml", url, "manager")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        yield crs, client.CustomObjectsApi(api), api, kubeconfig


def expected(crs: FakeCustomResources) -> str:
    versions = crs.resources["workloads"].versions
    return "v1beta2" if "v1beta2" in versions else "v1beta1"


def test_the_dispatcher_speaks_the_served_version_v1beta2_first(served: Served) -> None:
    crs, objects, api, _ = served
    version = expected(crs)
    assert served_version(api) == version
    set_up_multikueue(objects, CLUSTERS, version)
    create_workload(objects, "train", version=version)
    reserve_quota(objects, "train", version=version)
    d = KueueDispatcher(api, lambda: (SITE_BY_ID, TABLE), round_s=60.0)
    assert d.version == version
    d.resync()
    # the nomination is a status apply the upstream schema of that version accepted
    assert get(objects, "train", version)["status"]["nominatedClusterNames"] == ["iad"]
    writes = [path for _, path, _, _ in crs.requests if path.endswith("/workloads/train/status")]
    assert writes and all(f"/apis/{kq.GROUP}/{version}/namespaces/{NS}/" in p for p in writes)
    event = next(e for e in crs.events if e["reason"] == "Nominated")
    assert event["involvedObject"]["apiVersion"] == f"{kq.GROUP}/{version}"


def test_a_forced_version_is_kept(served: Served) -> None:
    crs, _, api, _ = served
    forced = "v1beta1" if "v1beta1" in crs.resources["workloads"].versions else "v1beta2"
    assert KueueDispatcher(api, lambda: (SITE_BY_ID, TABLE), version=forced).version == forced


def test_the_discovery_document_lists_the_served_versions_preferred_first(served: Served) -> None:
    crs, _, api, _ = served
    (group,) = [g for g in client.ApisApi(api).get_api_versions().groups if g.name == kq.GROUP]
    assert [v.version for v in group.versions or []] == list(reversed(sorted(crs.resources["workloads"].versions)))
    assert group.preferred_version is not None and group.preferred_version.version == expected(crs)


def test_without_kueue_the_dispatcher_says_so(tmp_path: Path) -> None:
    with serve_fake_crs(load_crds([TEST_CRD_DIR / "ocm.yaml"])) as (_, url):
        api = config.new_client_from_config(config_file=str(write_kubeconfig(tmp_path / "kc.yaml", url, "m")))
        with pytest.raises(KueueNotServed, match=r"kueue.x-k8s.io versions served: none.*is Kueue"):
            served_version(api)


def test_cli_discovers_the_version_and_keeps_the_flag(env: str, tmp_path: Path, upstream_crds: None) -> None:
    runner = CliRunner()
    with serve_fake_crs(serving({"v1beta2"})) as (_, url):
        kubeconfig = write_kubeconfig(tmp_path / "kc.yaml", url, "manager")
        objects = client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig)))
        set_up_multikueue(objects, CLUSTERS, "v1beta2")
        create_workload(objects, "train", version="v1beta2", **{kq.RESIDENCY_ANNOTATION: "gdpr-eu"})
        reserve_quota(objects, "train", version="v1beta2")
        base = ["kueue-dispatcher", "--kubeconfig", str(kubeconfig), "--once"]

        forced = runner.invoke(app, [*base, "--kueue-version", "v1beta1"])  # not served: every call would 404
        assert forced.exit_code == 2, forced.output
        assert "--kueue-version v1beta1: the cluster serves kueue.x-k8s.io v1beta2" in " ".join(forced.output.split())
        assert "nominatedClusterNames" not in get(objects, "train", "v1beta2")["status"]

        r = runner.invoke(app, base)
        assert r.exit_code == 0, r.output
        assert get(objects, "train", "v1beta2")["status"]["nominatedClusterNames"] == ["fra"]
        assert runner.invoke(app, [*base, "--kueue-version", "v1beta2"]).exit_code == 0  # forced and served

        bad = runner.invoke(app, [*base, "--kueue-version", "v1"])
        assert bad.exit_code == 2 and "--kueue-version must be auto, v1beta1 or v1beta2" in bad.output

    with serve_fake_crs(load_crds([TEST_CRD_DIR / "ocm.yaml"])) as (_, url):
        kubeconfig = write_kubeconfig(tmp_path / "none.yaml", url, "manager")
        r = runner.invoke(app, ["kueue-dispatcher", "--kubeconfig", str(kubeconfig), "--once"])
        assert r.exit_code == 1 and "is Kueue (v0.13+) installed?" in r.output
