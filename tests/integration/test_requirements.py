"""Instance requirements at the edges: the request document (422 naming the requirement), the pool
listing and its selector, the CLI's request files, and a placement on the full public catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INFEASIBLE, EXIT_INVALID
from broker.cli.main import app
from broker.core.instance_attributes import derive

pytestmark = pytest.mark.slow  # the full public catalog

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "requirements.yaml"
runner = CliRunner()


def request(*reqs: dict[str, Any], **workload: Any) -> dict[str, Any]:
    w = {"name": "api", "replicas": 4, "cpu": 2.0, "memory_gib": 4.0, "requirements": list(reqs), **workload}
    return {"name": "req", "dry_run": True, "workloads": [w]}


GOOD = {"key": "instance-family", "operator": "In", "values": ["m7i"]}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"key": "karpenter.k8s.aws/instance-colour", "operator": "In", "values": ["red"]}, "unknown requirement key"),
        ({"key": "instance-family", "operator": "Equals", "values": ["m7i"]}, "unknown operator"),
        ({"key": "instance-generation", "operator": "Gt", "values": ["five"]}, "not a number"),
        ({"key": "instance-generation", "operator": "Gt", "values": ["5", "6"]}, "exactly one value"),
        ({"key": "instance-generation", "operator": "Lt", "values": []}, "exactly one value"),
        ({"key": "instance-family", "operator": "In", "values": []}, "at least one value"),
        ({"key": "instance-family", "operator": "In"}, "at least one value"),
        ({"key": "gpu_name", "operator": "Exists", "values": ["t4"]}, "takes no values"),
        ({"key": "bare_metal", "operator": "In", "values": ["yes"]}, "not true or false"),
        ({"key": "instance-family", "operator": "In", "values": [["m7i"]]}, ""),
        ({"key": "instance-family", "operator": "In", "values": ["m7i"], "extra": 1}, ""),
    ],
)
def test_bad_requirements_are_a_422_naming_the_requirement(
    shared_client: TestClient, bad: dict[str, Any], message: str
) -> None:
    r = shared_client.post("/v1/placements", json=request(GOOD, bad))
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    errors = r.json()["errors"]
    assert errors and all(e["loc"][:5] == ["body", "workloads", 0, "requirements", 1] for e in errors), errors
    assert message in errors[0]["msg"]


def test_family_in_and_generation_gt_place_on_those_families(shared_client: TestClient) -> None:
    r = shared_client.post(
        "/v1/placements",
        json=request(
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7i", "m7a"]},
            {"key": "instance-generation", "operator": "Gt", "values": [5]},
        ),
    )
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["status"] in ("optimal", "feasible")
    assert sum(a["replicas"] for a in doc["assignments"]) == 4
    for a in doc["assignments"]:
        attrs = shared_client.get(f"/v1/pools/{a['pool']}").json()["attributes"]
        assert attrs["instance_family"] in ("m7i", "m7a") and attrs["instance_generation"] > 5
    # the requirement is what kept the plan off cheaper families
    assert any(b.startswith("requirements[0]:") for b in doc["assignments"][0]["explanation"]["binding"])


def test_a_requirement_no_pool_meets_is_named_in_the_infeasibility(shared_client: TestClient) -> None:
    gpu = {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]}
    arm = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    r = shared_client.post("/v1/placements", json=request(gpu, arm))
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["type"].endswith("/infeasible")
    # no Arm node carries an H100: the two requirements are the conflict, nothing else
    assert body["conflicts"] == [
        "requirements[0]:karpenter.k8s.aws/instance-gpu-name In [h100] on api",
        "requirements[1]:kubernetes.io/arch In [arm64] on api",
    ]


def test_pool_attributes_and_selector(shared_client: TestClient) -> None:
    attrs = shared_client.get("/v1/pools/aws:us-east-1/g5.xlarge/ondemand").json()["attributes"]
    assert attrs["instance_family"] == "g5" and attrs["gpu_name"] == "a10g" and attrs["gpu_memory_gib"] == 24
    assert attrs["processor"] and attrs["bare_metal"] is False and attrs["cpu_manufacturer"] == "amd"
    r = shared_client.get(
        "/v1/pools",
        params={
            "selector": "karpenter.k8s.aws/instance-gpu-name in (a100),gpu_memory_gib>60,!bare_metal",
            "limit": 1000,
        },
    )
    assert r.status_code == 200 and r.json()["total"] == 0  # every public A100 pool states bare_metal or not
    r = shared_client.get("/v1/pools", params={"selector": "gpu_name in (a100),gpu_memory_gib>60", "limit": 1000})
    items = r.json()["items"]
    assert items and all(i["attributes"]["gpu_memory_gib"] >= 80 for i in items)
    assert {i["instance_type"] for i in items} >= {"p4de.24xlarge", "Standard_NC24ads_A100_v4", "a2-ultragpu-1g"}
    plain = shared_client.get("/v1/pools", params={"limit": 1}).json()["items"][0]
    assert plain["attributes"] is None  # listings carry them when a selector asks


def test_bad_selector_is_a_422_naming_the_clause(shared_client: TestClient) -> None:
    r = shared_client.get("/v1/pools", params={"selector": "arch=arm64,instance-generation>abc"})
    assert r.status_code == 422
    (err,) = r.json()["errors"]
    assert err["loc"] == ["query", "selector", 1] and "not a number" in err["msg"]


# ---- the CLI's request files ---------------------------------------------------------------


def test_cli_places_the_requirements_example(env: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(EXAMPLE), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    types = {a["workload"]: derive(a["site"].split(":")[0], a["pool"].split("/")[1]) for a in doc["assignments"]}
    assert types["api"].family in ("m7i", "m7a")
    assert types["inference"].family in ("g5", "g6", "g2")  # the A10G and L4 families (24 GiB per GPU)
    assert (types["batch"].generation or 0) > 6


def test_cli_rejects_a_bad_requirement_and_names_it(env: str, tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["workloads"][1]["requirements"][1]["values"] = ["6", "7"]
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    r = runner.invoke(app, ["place", "-f", str(f)])
    assert r.exit_code == EXIT_INVALID
    assert "workloads.1.requirements.1" in r.output and "exactly one value" in r.output


def test_cli_exit_code_on_an_impossible_requirement(env: str, tmp_path: Path) -> None:
    doc = request({"key": "instance-generation", "operator": "Gt", "values": ["99"]})
    f = tmp_path / "impossible.json"
    f.write_text(json.dumps(doc))
    r = runner.invoke(app, ["place", "-f", str(f)])
    assert r.exit_code == EXIT_INFEASIBLE
    assert "requirements[0]:instance-generation Gt 99 on api" in r.output


# ---- attributes from live feeds ------------------------------------------------------------


def test_a_live_feeds_facts_reach_the_pool_attributes(broker: Any) -> None:
    from broker.catalog.refresh import write_feed
    from pricing.offers import FeedResult, InstanceSpec, Offer

    feed = FeedResult(
        "aws",
        offers=[
            Offer("aws", "us-east-1", "m9z.large", "ondemand", 0.2, "2026-12-01"),  # a type only the feed knows
            Offer("aws", "us-east-1", "g5.xlarge", "ondemand", 1.0, "2026-12-01"),
        ],
        specs={
            "m9z.large": InstanceSpec("m9z.large", 2, 8, processor="AMD EPYC 9R99", bare_metal=False),
            "g5.xlarge": InstanceSpec("g5.xlarge", 4, 16, gpus=1, gpu_model="A10G", gpu_memory_gib=22.0),
        },
        regions=["us-east-1"],
    )
    assert write_feed(broker.sessions, feed).added == 1
    t = broker.catalog().table
    new = t.attributes.of(t.pool_index["aws:us-east-1/m9z.large/ondemand"])
    assert (new["instance_family"], new["instance_generation"], new["instance_size"]) == ("m9z", 9, "large")
    assert new["processor"] == "AMD EPYC 9R99" and new["cpu_manufacturer"] == "amd" and new["bare_metal"] is False
    # the feed's statement wins over the bundled catalog's (24 GiB there)
    assert t.attributes.of(t.pool_index["aws:us-east-1/g5.xlarge/ondemand"])["gpu_memory_gib"] == 22
