"""kube-scheduler extender over HTTP, with arguments shaped as the upstream Go types marshal them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from broker.app import Broker
from broker.settings import Settings

SITES = Path(__file__).resolve().parents[1] / "fixtures" / "sites" / "fra-dc1.yaml"

FRA = {"topology.kubernetes.io/region": "eu-central-1", "node.kubernetes.io/instance-type": "m6i.xlarge"}
IAD = {"topology.kubernetes.io/region": "us-east-1", "node.kubernetes.io/instance-type": "m6i.xlarge"}


def _node(name: str, region: str, labels: dict[str, str]) -> dict[str, Any]:
    # a v1.Node as client-go serialises it: metadata, spec.providerID, status
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/arch": "amd64", **labels}},
        "spec": {"providerID": f"aws:///{region}a/i-{name}"},
        "status": {"allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"}},
    }


def _args(annotations: dict[str, str]) -> dict[str, Any]:
    pod = {
        "metadata": {"name": "api-0", "namespace": "shop", "annotations": annotations},
        "spec": {"containers": [{"name": "api", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]},
    }
    nodes = {"metadata": {}, "items": [_node("fra-1", "eu-central-1", FRA), _node("iad-1", "us-east-1", IAD)]}
    return {"Pod": pod, "Nodes": nodes, "NodeNames": None}


def test_filter_keeps_only_nodes_the_residency_policy_allows(shared_client: TestClient) -> None:
    r = shared_client.post("/extender/filter", json=_args({"placement-broker.dev/residency": "gdpr-eu"}))
    assert r.status_code == 200
    body = r.json()
    assert body["Error"] == ""
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["fra-1"]
    assert set(body["FailedAndUnresolvableNodes"]) == {"iad-1"}


def test_prioritize_prefers_the_chosen_pool_then_the_cheaper_site(shared_client: TestClient) -> None:
    chosen = {"placement-broker.dev/pool": "aws:eu-central-1/m6i.xlarge/ondemand"}
    scores = {h["Host"]: h["Score"] for h in shared_client.post("/extender/prioritize", json=_args(chosen)).json()}
    assert scores == {"fra-1": 10, "iad-1": scores["iad-1"]}
    assert 1 <= scores["iad-1"] <= 9
    plain = {h["Host"]: h["Score"] for h in shared_client.post("/extender/prioritize", json=_args({})).json()}
    # us-east-1 lists m6i.xlarge cheaper than Frankfurt does
    assert plain["iad-1"] > plain["fra-1"]


def test_node_names_only_pass_through_with_neutral_scores(shared_client: TestClient) -> None:
    args = {"pod": _args({})["Pod"], "nodenames": ["a", "b"]}  # an older client's lower-case names
    assert shared_client.post("/extender/filter", json=args).json()["NodeNames"] == ["a", "b"]
    assert shared_client.post("/extender/prioritize", json=args).json() == [
        {"Host": "a", "Score": 0},
        {"Host": "b", "Score": 0},
    ]


def test_bad_arguments_answer_in_the_error_field_not_a_5xx(shared_client: TestClient) -> None:
    r = shared_client.post(
        "/extender/filter",
        json={"Pod": {"spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}}, "NodeNames": ["a"]},
    )
    assert r.status_code == 200
    assert "not a Kubernetes quantity" in r.json()["Error"]
    assert shared_client.post("/extender/prioritize", json=[1]).json() == []


def _with(path: str, value: Any) -> dict[str, Any]:
    """Good ExtenderArgs with the field at a dotted path ("Pod.spec.containers", "Nodes.items.0.metadata") replaced."""
    args = _args({})
    *parents, last = path.split(".")
    doc: Any = args
    for key in parents:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    doc[int(last) if isinstance(doc, list) else last] = value
    return args


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not json", "ExtenderArgs is not JSON"),
        (b"", "ExtenderArgs is not JSON"),
        (b"\xff\xfe", "ExtenderArgs is not JSON"),
        pytest.param(b"[" * 100_000, "ExtenderArgs is not JSON", id="nested-too-deep"),
        (b"[1]", "ExtenderArgs must be a JSON object"),
        (b'{"Pod":{"spec":{"containers":"x"}},"NodeNames":["a"]}', "Pod.spec.containers: expected a list"),
        (_with("Pod.metadata", "x"), "Pod.metadata: expected an object"),
        (_with("Pod.spec", []), "Pod.spec: expected an object"),
        (_with("Pod.metadata.annotations", ["a"]), "Pod.metadata.annotations: expected an object"),
        (_with("Pod.metadata.annotations", {"a": 1}), "Pod.metadata.annotations['a']: expected a string"),
        (_with("Pod.metadata.name", 7), "Pod.metadata.name: expected a string"),
        (_with("Pod.metadata.namespace", {}), "Pod.metadata.namespace: expected a string"),
        (_with("Pod.spec.containers.0", "c"), r"Pod.spec.containers[0]: expected an object"),
        (_with("Pod.spec.containers.0.resources", 1), r"Pod.spec.containers[0].resources: expected an object"),
        (_with("Pod.spec.containers.0.resources.requests", ["cpu"]), "resources.requests: expected an object"),
        (_with("Pod.spec.containers.0.resources.requests.cpu", [1]), "not a Kubernetes quantity"),
        (_with("Pod.spec.initContainers", {}), "Pod.spec.initContainers: expected a list"),
        (_with("Nodes.items.0.metadata", "x"), "Nodes.items[0].metadata: expected an object"),
        (_with("Nodes.items.1.metadata.name", ["n"]), "Nodes.items[1].metadata.name: expected a string"),
        (_with("Nodes.items.0.metadata.labels", ["a=b"]), "Nodes.items[0].metadata.labels: expected an object"),
        (
            _with("Nodes.items.0.metadata.labels", {"topology.kubernetes.io/region": 1}),
            "Nodes.items[0].metadata.labels['topology.kubernetes.io/region']: expected a string",
        ),
        (_with("Nodes.items.0.metadata.annotations", "x"), "Nodes.items[0].metadata.annotations: expected an object"),
        (_with("Nodes.items.0.spec", "x"), "Nodes.items[0].spec: expected an object"),
        (_with("Nodes.items.0.spec.providerID", 1), "Nodes.items[0].spec.providerID: expected a string"),
        (_with("Nodes.items", [1]), "NodeList with an items array"),
    ],
)
def test_malformed_arguments_answer_200_naming_what_is_wrong(
    shared_client: TestClient, body: bytes | dict[str, Any], error: str
) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = shared_client.post("/extender/filter", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert error in r.json()["Error"]
    assert "internal error" not in r.json()["Error"]
    p = shared_client.post("/extender/prioritize", content=raw, headers={"Content-Type": "application/json"})
    assert (p.status_code, p.json()) == (200, [])


@pytest.fixture(scope="module")
def with_sites(module_db_url: str) -> Iterator[TestClient]:
    """A broker whose catalog holds the private and edge sites of tests/fixtures/sites/fra-dc1.yaml."""
    from api.app import create_app

    with TestClient(create_app(broker=Broker.open(Settings(database_url=module_db_url), prepare=False))) as client:
        assert client.post("/v1/sites", json=yaml.safe_load(SITES.read_text())).status_code == 201
        yield client


def _owned_node(name: str, site: str, instance_type: str) -> dict[str, Any]:
    # a data centre's node: no cloud providerID, its site in the broker's annotation
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": instance_type},
            "annotations": {"placement-broker.dev/site": site},
        },
        "spec": {},
    }


def _walk_through(chosen: str) -> dict[str, Any]:
    """The nodes of a user's walk-through: an AWS node Karpenter calls on-demand (a reserved
    instance looks the same), a spot one, and a node of a private data centre."""
    args = _args({"placement-broker.dev/pool": chosen})
    args["Nodes"]["items"] = [
        _node("fra-od", "eu-central-1", {**FRA, "karpenter.sh/capacity-type": "on-demand"}),
        _node("fra-spot", "eu-central-1", {**FRA, "karpenter.sh/capacity-type": "spot"}),
        _owned_node("dc1-n1", "private:fra-dc1", "r740-std"),
    ]
    return args


@pytest.mark.parametrize(
    ("chosen", "top"),
    [
        ("aws:eu-central-1/m6i.xlarge/reserved", "fra-od"),
        ("aws:eu-central-1/m6i.xlarge/ondemand", "fra-od"),
        ("aws:eu-central-1/m6i.xlarge/spot", "fra-spot"),
        ("private:fra-dc1/r740-std/reserved", "dc1-n1"),
    ],
)
def test_prioritize_scores_the_chosen_pool_top_on_the_nodes_dispatch_selects(
    with_sites: TestClient, chosen: str, top: str
) -> None:
    r = with_sites.post("/extender/prioritize", json=_walk_through(chosen))
    scores = {h["Host"]: h["Score"] for h in r.json()}
    assert scores[top] == 10
    # every other node is priced: the private node by its site's reserved (owned) pool
    assert all(1 <= score <= 9 for host, score in scores.items() if host != top), scores
