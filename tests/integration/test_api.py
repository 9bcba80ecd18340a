"""The REST API against a real SQLite database with the full bundled catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def checkout() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    return doc


def test_health_and_openapi(shared_client: TestClient) -> None:
    h = shared_client.get("/healthz").json()
    assert h["status"] == "ok" and h["pools"] > 150_000 and h["sites"] > 150
    spec = shared_client.get("/openapi.json").json()
    for path in (
        "/v1/sites",
        "/v1/pools",
        "/v1/latency",
        "/v1/policies",
        "/v1/placements",
        "/v1/placements/{placement_id}",
    ):
        assert path in spec["paths"]
    assert shared_client.get("/docs").status_code == 200


def test_sites_carry_contract_fields(shared_client: TestClient) -> None:
    sites = {s["id"]: s for s in shared_client.get("/v1/sites").json()}
    fra = sites["aws:eu-central-1"]
    assert fra["country"] == "DE" and {"EU", "EEA"} <= set(fra["jurisdictions"]) and fra["kind"] == "public"
    assert fra["lat"] == pytest.approx(50.1, abs=0.5)
    assert sites["gcp:europe-west1"]["carbon_g_per_kwh"] is not None
    # the contract's kinds: private and edge sites are owned, `<kind>:<name>`; AWS's zones are public
    assert all(s["id"].startswith(f"{s['kind']}:") for s in sites.values() if s["kind"] != "public")
    assert sites["aws:us-east-1-bos-1"]["kind"] == "public"


@pytest.mark.parametrize(
    ("params", "check"),
    [
        ({"site": "aws:eu-central-1"}, lambda p: p["site"] == "aws:eu-central-1"),
        ({"provider": "gcp"}, lambda p: p["site"].startswith("gcp:")),
        ({"capacity_type": "spot"}, lambda p: p["capacity_type"] == "spot"),
        ({"min_vcpus": 64, "min_memory_gib": 512}, lambda p: p["vcpus"] >= 64 and p["memory_gib"] >= 512),
        ({"min_gpus": 1}, lambda p: p["gpus"] >= 1 and p["gpu_model"]),
        ({"arch": "arm64"}, lambda p: p["arch"] == "arm64"),
    ],
)
def test_pool_filters(shared_client: TestClient, params: dict[str, Any], check: Any) -> None:
    page = shared_client.get("/v1/pools", params={**params, "limit": 50}).json()
    assert page["total"] > 0 and page["items"]
    assert all(check(p) for p in page["items"])
    assert all(p["id"] == f"{p['site']}/{p['instance_type']}/{p['capacity_type']}" for p in page["items"])


def test_pool_prices_equal_the_catalog(shared_client: TestClient) -> None:
    # aws_ec2_linux_prices.csv: eu-central-1,m6i.xlarge on-demand 0.23 (AWS list price)
    pool = shared_client.get("/v1/pools/aws:eu-central-1/m6i.xlarge/ondemand").json()
    assert pool["price_per_hour"] == pytest.approx(0.23) and pool["vcpus"] == 4 and pool["memory_gib"] == 16
    assert pool["price_source"] == "aws" and pool["arch"] == "amd64"


def test_pagination(shared_client: TestClient) -> None:
    a = shared_client.get("/v1/pools", params={"site": "aws:eu-central-1", "limit": 5, "offset": 0}).json()
    b = shared_client.get("/v1/pools", params={"site": "aws:eu-central-1", "limit": 5, "offset": 5}).json()
    assert a["total"] == b["total"] and not {p["id"] for p in a["items"]} & {p["id"] for p in b["items"]}


def test_latency_measured_and_estimated(shared_client: TestClient) -> None:
    m = shared_client.get("/v1/latency", params={"from": "aws:eu-central-1", "to": "aws:eu-west-1"}).json()
    assert m["source"] == "measured" and 5 < m["rtt_ms"] < 60
    e = shared_client.get("/v1/latency", params={"from": "aws:eu-central-1", "to": "geo:50.11,8.68"}).json()
    assert e["source"] == "estimated" and 0 < e["rtt_ms"] < 40


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "aws:nowhere-1", "to": "aws:eu-west-1"}, "from"),
        ({"from": "aws:eu-central-1", "to": "geo:91,0"}, "to"),
        ({"from": "aws:eu-central-1", "to": "geo:abc"}, "to"),
    ],
)
def test_latency_bad_input_is_problem_json(shared_client: TestClient, params: dict[str, str], field: str) -> None:
    r = shared_client.get("/v1/latency", params=params)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["loc"] == ["query", field]


def test_policies(shared_client: TestClient) -> None:
    names = {p["name"] for p in shared_client.get("/v1/policies").json()}
    assert {
        "gdpr-eu",
        "us-only",
        "uk-only",
        "canada-only",
        "switzerland-only",
        "australia-only",
        "india-only",
        "japan-only",
    } <= names


def test_place_dry_run_follows_the_contract(shared_client: TestClient) -> None:
    r = shared_client.post("/v1/placements", json=checkout())
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["id"] is None and doc["status"] in ("optimal", "feasible")
    assert sum(a["replicas"] for a in doc["assignments"] if a["workload"] == "checkout-api") == 6
    assert sum(a["replicas"] for a in doc["assignments"] if a["workload"] == "orders-db") == 2
    sites = {s["id"]: s for s in shared_client.get("/v1/sites").json()}
    for a in doc["assignments"]:
        assert {"EEA"} <= set(sites[a["site"]]["jurisdictions"])  # gdpr-eu
        assert a["latency_ms"]["eu-users"] <= 40
        assert a["explanation"]["next_best"]
    assert len({a["site"] for a in doc["assignments"] if a["workload"] == "checkout-api"}) >= 2
    total = sum(n["cost_per_hour"] for n in doc["nodes"]) + doc["egress_cost_per_hour"] + doc["storage_cost_per_hour"]
    assert doc["cost_per_hour"] == pytest.approx(total, abs=1e-5)
    assert doc["storage_cost_per_hour"] > 0  # 50 GiB ssd + 500 GiB premium per replica
    assert doc["lower_bound_per_hour"] <= doc["cost_per_hour"]
    assert doc["baseline"]["cost_per_hour"] >= doc["cost_per_hour"] and doc["savings_pct"] >= 0
    # exact packing (extension): every replica on a numbered node of its pool, as many nodes as `nodes`
    per_pool: dict[str, list[int]] = {}
    for node in doc["node_assignments"]:
        per_pool.setdefault(node["pool"], []).append(node["node"])
    assert per_pool == {n["pool"]: list(range(n["count"])) for n in doc["nodes"]}
    assert doc["packing"]["nodes"] == sum(n["count"] for n in doc["nodes"])


DEAR_POOL = "aws:eu-central-1/m6i.4xlarge/ondemand"  # 4 vCPU / 16 GiB replicas fit; dominated in the catalog


def test_savings_pct_is_against_the_kubernetes_packer_and_greedy_is_second(shared_client: TestClient) -> None:
    doc = shared_client.post("/v1/placements", json=checkout()).json()
    base = doc["baseline"]
    assert base["policy"] == "kubernetes-packer" and "every pool the request allows" in base["description"]
    assert doc["savings_pct"] == pytest.approx((1 - doc["cost_per_hour"] / base["cost_per_hour"]) * 100, abs=0.01)
    head, *others = doc["baselines"]
    assert head == {**base, "savings_pct": doc["savings_pct"]}
    greedy = next(b for b in others if b["policy"] == "greedy-cheapest-fit")
    home = next(b for b in others if b["policy"] == "kubernetes-packer-home-cloud")
    assert "on-demand" in home["description"]
    assert greedy["policy"] == "greedy-cheapest-fit"
    assert greedy["savings_pct"] == pytest.approx((1 - doc["cost_per_hour"] / greedy["cost_per_hour"]) * 100, abs=0.01)
    # a request that says what runs now is compared with keeping it, even on a pool the solver
    # never considers (dominated: a same-site node at least as large and no dearer)
    running = [{"workload": a["workload"], "pool": a["pool"], "replicas": a["replicas"]} for a in doc["assignments"]]
    db = [c for c in running if c["workload"] == "orders-db"]
    running = [c for c in running if c["workload"] != "orders-db"]
    running.append({"workload": "orders-db", "pool": DEAR_POOL, "replicas": sum(c["replicas"] for c in db)})
    replan = shared_client.post("/v1/placements", json={**checkout(), "current": running}).json()
    assert replan["baseline"]["policy"] == "placement-in-force"
    assert replan["baseline"]["cost_per_hour"] > replan["cost_per_hour"]
    assert replan["savings_pct"] == pytest.approx(
        (1 - replan["cost_per_hour"] / replan["baseline"]["cost_per_hour"]) * 100, abs=0.01
    )
    # the definitions are in the OpenAPI descriptions
    schemas = shared_client.get("/openapi.json").json()["components"]["schemas"]
    out = next(v for k, v in schemas.items() if k.startswith("PlacementOut"))
    assert "kubernetes-packer" in out["properties"]["baseline"]["description"]
    assert "1 - cost_per_hour / baseline.cost_per_hour" in out["properties"]["savings_pct"]["description"]


@pytest.mark.both_backends
def test_placements_are_stored_listed_and_fetched(client: TestClient) -> None:
    doc = {**checkout(), "dry_run": False, "name": "stored one"}
    r = client.post("/v1/placements", json=doc)
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    assert pid.startswith("pl_") and r.headers["location"] == f"/v1/placements/{pid}"
    again = client.get(f"/v1/placements/{pid}")
    # stored as rows, read back as the very document the POST answered (30 vs 30.0 would differ)
    assert json.dumps(again.json(), sort_keys=True) == json.dumps(r.json(), sort_keys=True)
    assert again.json()["node_assignments"] and again.json()["packing"]  # the packing is stored too
    second = client.post("/v1/placements", json={**doc, "name": "second"}).json()
    listing = client.get("/v1/placements", params={"limit": 1}).json()
    assert listing["total"] == 2 and listing["items"][0]["id"] == second["id"]  # newest first
    assert listing["items"][0]["created_at"] == second["created_at"]  # with its UTC offset on either database
    assert client.get("/v1/placements/pl_nope").status_code == 404


def test_infeasible_is_422_with_conflicts(shared_client: TestClient) -> None:
    doc = yaml.safe_load((EXAMPLES / "impossible.yaml").read_text())
    r = shared_client.post("/v1/placements", json=doc)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert set(body["conflicts"]) == {
        "residency:gdpr-eu on checkout-api",
        "latency_slo_ms:us-users<=20 on checkout-api",
    }


def _w(**kw: Any) -> dict[str, Any]:
    return {"name": "api", "replicas": 1, "cpu": 1, "memory_gib": 1, **kw}


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"name": "x", "workloads": [_w(replicas=0)]}, ["body", "workloads", 0, "replicas"]),
        ({"name": "x", "workloads": [_w(cpu="two")]}, ["body", "workloads", 0, "cpu"]),
        ({"name": "x", "workloads": [_w(residency="mars-only")]}, ["body", "workloads", 0, "residency"]),
        # a country code that does not exist is invalid, not infeasible
        (
            {"name": "x", "workloads": [_w(residency={"allowed_countries": ["XX"]})]},
            ["body", "workloads", 0, "residency"],
        ),
        ({"name": "x", "workloads": [_w(arch=["sparc"])]}, ["body", "workloads", 0, "arch", 0]),
        (
            {"name": "x", "workloads": [_w(capacity_types=["cheap"])]},
            ["body", "workloads", 0, "capacity_types", 0],
        ),
        ({"name": "x", "workloads": [_w(replica=3)]}, ["body", "workloads", 0, "replica"]),
        ({"name": "x", "workloads": []}, ["body", "workloads"]),
        ({"workloads": [_w()]}, ["body", "name"]),
        (
            {"name": "x", "user_regions": [{"name": "u", "lat": 95, "lon": 0}], "workloads": [_w()]},
            ["body", "user_regions", 0, "lat"],
        ),
        (
            {"name": "x", "workloads": [_w(latency_slo_ms={"ghosts": 10})]},
            ["body", "workloads", 0, "latency_slo_ms", "ghosts"],
        ),
        (
            {"name": "x", "workloads": [_w(depends_on=[{"workload": "nope", "gib_per_hour": 1}])]},
            ["body", "workloads", 0, "depends_on", 0, "workload"],
        ),
        (
            {"name": "x", "user_regions": [{"name": "u", "site": "aws:atlantis-1"}], "workloads": [_w()]},
            ["body", "user_regions", 0, "site"],
        ),
    ],
)
def test_bad_requests_name_the_field(shared_client: TestClient, body: dict[str, Any], loc: list[Any]) -> None:
    r = shared_client.post("/v1/placements", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert {"type", "title", "status", "detail"} <= problem.keys()
    assert any(e["loc"][: len(loc)] == loc for e in problem["errors"]), problem["errors"]


@pytest.mark.parametrize("raw", [b"{not json", b"[]", b"null", b'"text"'])
def test_malformed_bodies_never_500(shared_client: TestClient, raw: bytes) -> None:
    r = shared_client.post("/v1/placements", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")


def test_unknown_route_is_problem_json(shared_client: TestClient) -> None:
    r = shared_client.get("/v1/nothing-here")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("put", "/v1/budgets", {"monthly_usd": 5000, "colour": 1}),
        ("post", "/v1/latency/measurements", {"measurements": [], "colour": 1}),
        ("post", "/v1/simulations", {"fleet": {}, "colour": 1}),
    ],
)
def test_a_misspelt_field_is_named_not_ignored(shared_client: TestClient, method: str, url: str, body: dict) -> None:  # type: ignore[type-arg]
    """As placement requests: a field the endpoint does not know (a typo of one it does) is a 422
    naming it, not a 200 that silently ignored what the caller meant."""
    r = getattr(shared_client, method)(url, json=body)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json"), r.text
    assert any(e["loc"][-1] == "colour" for e in r.json()["errors"]), r.json()["errors"]
