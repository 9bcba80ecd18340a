"""GET /v1/latency/matrix and `broker latency matrix`: many pairs in one call, each answered as
GET /v1/latency answers it (the catalog's figures, or the tenant's own measurements)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.catalog.latency_matrix import MAX_PAIRS
from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

OREGON = {"name": "oregon-users", "lat": 45.52, "lon": -122.68}
FRANKFURT = {"name": "eu-users", "site": "aws:eu-central-1"}
SOURCES = ["aws:us-east-1", "aws:ap-south-1", "gcp:europe-west1", "geo:35.68,139.69"]
TARGETS = ["aws:eu-west-1", "geo:45.52,-122.68", "azure:westeurope"]


def single(client: TestClient, src: str, dst: str, quantile: str) -> dict[str, Any]:
    r = client.get("/v1/latency", params={"from": src, "to": dst, "quantile": quantile})
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.parametrize("quantile", ["p50", "p95"])
def test_the_matrix_is_the_single_calls_pair_by_pair(shared_client: TestClient, quantile: str) -> None:
    r = shared_client.get("/v1/latency/matrix", params={"from": SOURCES, "to": TARGETS, "quantile": quantile})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["from"] == SOURCES and doc["to"] == TARGETS and doc["total"] == len(SOURCES) * len(TARGETS)
    assert [(i["from"], i["to"]) for i in doc["items"]] == [(s, t) for s in SOURCES for t in TARGETS]
    for item in doc["items"]:
        assert item == single(shared_client, item["from"], item["to"], quantile)
    assert {i["method"] for i in doc["items"]} >= {"measured", "anchored"}


def test_own_measurements_and_a_placements_user_regions(client: TestClient) -> None:
    request = {
        "name": "users",
        "user_regions": [OREGON, FRANKFURT],
        "workloads": [{"name": "api", "replicas": 1, "cpu": 1, "memory_gib": 2}],
        "time_limit_s": 5,
    }
    placed = client.post("/v1/placements", json=request)
    assert placed.status_code in (200, 201), placed.text
    pid = placed.json()["id"]
    own = {
        "measurements": [
            {"from": "aws:us-east-1", "to": "oregon-users", "rtt_ms": 71.5, "source": "probes"},
            {"from": "aws:us-east-1", "to": "aws:eu-west-1", "rtt_ms": 61.0},
        ]
    }
    assert client.post("/v1/latency/measurements", json=own).status_code == 201
    r = client.get("/v1/latency/matrix", params={"from": ["aws:us-east-1", "aws:us-west-2"], "placement": pid})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["to"] == doc["user_regions"] == ["oregon-users", "eu-users"]
    items = {(i["from"], i["to"]): i for i in doc["items"]}
    # a measurement naming the region wins, as in the placement's own latency checks
    assert items[("aws:us-east-1", "oregon-users")]["rtt_ms"] == 71.5
    assert items[("aws:us-east-1", "oregon-users")]["method"] == "imported"
    # without one: the figure of the region's point or site, as GET /v1/latency gives it
    west = single(client, "aws:us-west-2", "geo:45.52,-122.68", "p50")
    assert items[("aws:us-west-2", "oregon-users")]["rtt_ms"] == west["rtt_ms"]
    assert (
        items[("aws:us-east-1", "eu-users")]["rtt_ms"]
        == single(client, "aws:us-east-1", "aws:eu-central-1", "p50")["rtt_ms"]
    )
    # a site-to-site measurement counts in the matrix as in the single call
    pair = client.get("/v1/latency/matrix", params={"from": "aws:us-east-1", "to": "aws:eu-west-1"}).json()
    assert pair["items"] == [single(client, "aws:us-east-1", "aws:eu-west-1", "p50")]
    assert pair["items"][0]["rtt_ms"] == 61.0


def test_without_from_every_site_is_a_source(shared_client: TestClient) -> None:
    sites = [s["id"] for s in shared_client.get("/v1/sites").json()]
    doc = shared_client.get("/v1/latency/matrix", params={"to": "geo:50.11,8.68"}).json()
    assert sorted(doc["from"]) == sorted(sites) and doc["total"] == len(sites)
    # a site without coordinates gets no figure but does not sink the matrix
    for item in doc["items"]:
        assert (item["rtt_ms"] is None) == ("detail" in item)


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        ({"from": ["aws:us-east-1", "aws:nowhere-1"], "to": "aws:eu-west-1"}, ["query", "from", 1]),
        ({"from": "aws:us-east-1", "to": ["geo:0,0", "geo:91,0"]}, ["query", "to", 1]),
        ({"from": "aws:us-east-1"}, ["query", "to"]),
        ({"from": "aws:us-east-1", "to": "aws:eu-west-1", "quantile": "p99"}, ["query", "quantile"]),
    ],
)
def test_bad_input_is_a_problem_naming_the_field(
    shared_client: TestClient, params: dict[str, Any], loc: list[Any]
) -> None:
    r = shared_client.get("/v1/latency/matrix", params=params)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["loc"] == loc


def test_past_the_limit_is_a_422_naming_from_and_to(shared_client: TestClient) -> None:
    targets = [f"geo:{lat},{lon}" for lat in range(-40, 60, 2) for lon in range(0, 10)]  # 500 points
    r = shared_client.get("/v1/latency/matrix", params={"to": targets})  # every site x 500 > MAX_PAIRS
    assert r.status_code == 422, r.text
    doc = r.json()
    assert [e["loc"] for e in doc["errors"]] == [["query", "from"], ["query", "to"]]
    assert f"at most {MAX_PAIRS}" in doc["detail"]


def test_an_unknown_placement_is_a_404(shared_client: TestClient) -> None:
    r = shared_client.get("/v1/latency/matrix", params={"from": "aws:us-east-1", "placement": "pl_nothing"})
    assert r.status_code == 404


def test_the_cli_gives_the_same_figures(env: str, shared_client: TestClient) -> None:
    runner = CliRunner()
    args = ["latency", "matrix", "--to", "aws:eu-west-1", "--to", "geo:45.52,-122.68", "--format", "json"]
    r = runner.invoke(app, [*args, "--from", "aws:us-east-1", "--from", "gcp:europe-west1"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert len(doc["items"]) == 4
    for item in doc["items"]:
        assert item == single(shared_client, item["from"], item["to"], "p50")
    table = runner.invoke(app, [*args[:-2], "--from", "aws:us-east-1"])
    assert table.exit_code == 0 and "aws:eu-west-1" in table.stdout and "ms" in table.stdout
    bad = runner.invoke(app, [*args, "--from", "aws:nowhere-1"])
    assert bad.exit_code == EXIT_INVALID and "--from" in bad.output and "unknown site" in bad.output
