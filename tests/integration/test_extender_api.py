"""kube-scheduler extender over HTTP, with arguments shaped as the upstream Go types marshal them."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

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
