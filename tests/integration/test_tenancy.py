"""Tenant isolation, budgets and fair share, through the API on a real SQLite database."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.app import Broker
from broker.placements import fairshare
from tests.integration.service_support import key, open_broker, service_client, small_request


@pytest.fixture()
def secured(db_url: str) -> Broker:
    return open_broker(db_url, auth="required")


@pytest.fixture()
def api(secured: Broker) -> Any:
    with service_client(secured) as c:
        yield c


@pytest.mark.both_backends
def test_tenants_cannot_see_each_others_data(api: TestClient, secured: Broker) -> None:
    a, b = key(secured, "alpha"), key(secured, "beta")
    placed = api.post("/v1/placements", json=small_request("a-plan"), headers=a)
    assert placed.status_code == 201
    pid = placed.json()["id"]
    job = api.post("/v1/placements", json=small_request("a-job", dry_run=True, **{"async": True}), headers=a).json()
    assert api.put("/v1/budgets", json={"monthly_usd": 1000}, headers=a).status_code == 200
    a_key = api.post("/v1/apikeys", json={"role": "viewer"}, headers=a).json()["id"]

    # the owner sees everything
    assert api.get(f"/v1/placements/{pid}", headers=a).status_code == 200
    assert api.get(f"/v1/jobs/{job['id']}", headers=a).status_code == 200
    # the other tenant gets 404 for each id and empty lists
    for path in (f"/v1/placements/{pid}", f"/v1/jobs/{job['id']}"):
        r = api.get(path, headers=b)
        assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json", path
    assert api.delete(f"/v1/apikeys/{a_key}", headers=b).status_code == 404
    assert api.get("/v1/placements", headers=b).json()["total"] == 0
    assert api.get("/v1/placements", params={"name": "a-plan"}, headers=b).json()["items"] == []
    assert api.get("/v1/jobs", headers=b).json()["total"] == 0
    assert api.get("/v1/budgets", headers=b).json() == {"tenant": "beta", "committed_per_month": 0.0, "budgets": []}
    assert all(k["tenant"] == "beta" for k in api.get("/v1/apikeys", headers=b).json())
    # and the owner's view is unchanged by the other's attempts
    assert api.get("/v1/placements", headers=a).json()["total"] == 1
    assert api.get("/v1/apikeys", headers=a).json()[-1]["revoked_at"] is None


@pytest.mark.both_backends
def test_budget_refuses_a_placement_with_figures_unless_allowed(api: TestClient, secured: Broker) -> None:
    h = key(secured, "alpha", "admin")
    first = api.post("/v1/placements", json=small_request("web"), headers=h).json()
    monthly = first["cost_per_hour"] * 730
    assert monthly > 1
    # budget just above what "web" commits: re-placing "web" replaces its commitment, fits
    api.put("/v1/budgets", json={"monthly_usd": round(monthly * 1.5, 2)}, headers=h)
    again = api.post("/v1/placements", json=small_request("web"), headers=h)
    assert again.status_code == 201
    [fig] = again.json()["budget"]
    assert fig["used"] == 0 and fig["this_placement"] == pytest.approx(monthly, abs=0.01) and not fig["over"]
    # a second service with the same cost would exceed the budget: 422 with the figures
    over = api.post("/v1/placements", json=small_request("batch"), headers=h)
    assert over.status_code == 422
    doc = over.json()
    assert doc["type"].endswith("/over-budget")
    assert doc["budget"]["used"] == pytest.approx(monthly, abs=0.01)
    assert doc["budget"]["projected"] > doc["budget"]["monthly_usd"] and doc["budget"]["over"]
    assert api.get("/v1/placements", params={"name": "batch"}, headers=h).json()["total"] == 0
    # a dry run is checked too; allow_over_budget places it anyway and reports the overrun
    assert api.post("/v1/placements", json=small_request("batch", dry_run=True), headers=h).status_code == 422
    allowed = api.post("/v1/placements", json=small_request("batch", allow_over_budget=True), headers=h)
    assert allowed.status_code == 201 and allowed.json()["budget"][0]["over"]
    report = api.get("/v1/budgets", headers=h).json()
    assert report["committed_per_month"] == pytest.approx(2 * monthly, abs=0.02)
    assert report["budgets"][0]["remaining"] < 0


@pytest.mark.both_backends
def test_team_budget_counts_only_that_team(api: TestClient, secured: Broker) -> None:
    h = key(secured, "alpha", "admin")
    cost = api.post("/v1/placements", json=small_request("probe", dry_run=True), headers=h).json()["cost_per_hour"]
    api.put("/v1/budgets", json={"monthly_usd": round(cost * 730 * 1.5, 2), "team": "payments"}, headers=h)
    assert api.post("/v1/placements", json=small_request("p1", team="payments"), headers=h).status_code == 201
    assert api.post("/v1/placements", json=small_request("s1", team="search"), headers=h).status_code == 201
    assert api.post("/v1/placements", json=small_request("p2", team="payments"), headers=h).status_code == 422
    budgets = api.get("/v1/budgets", headers=h).json()["budgets"]
    assert budgets[0]["team"] == "payments" and budgets[0]["used"] == pytest.approx(cost * 730, abs=0.01)
    assert api.delete("/v1/budgets", params={"team": "payments"}, headers=h).status_code == 204
    assert api.post("/v1/placements", json=small_request("p2", team="payments"), headers=h).status_code == 201


@pytest.mark.both_backends
def test_cli_place_exits_4_over_budget(db_url: str, secured: Broker, tmp_path: Any) -> None:
    import json

    from broker.cli.main import app

    env = {"BROKER_DATABASE_URL": db_url}
    runner = CliRunner()
    assert runner.invoke(app, ["budget", "set", "--tenant", "default", "--monthly-usd", "0.01"], env=env).exit_code == 0
    req = tmp_path / "r.json"
    req.write_text(json.dumps(small_request("cli")))
    result = runner.invoke(app, ["place", "-f", str(req)], env=env)
    assert result.exit_code == 4, result.output
    req.write_text(json.dumps(small_request("cli", allow_over_budget=True)))
    assert runner.invoke(app, ["place", "-f", str(req)], env=env).exit_code == 0


# ---- fair share --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_nodes", "tenant", "weights", "expected"),
    [
        (40, "a", {}, 40),  # no weights: no cap
        (40, "a", {"a": 1, "b": 1}, 20),
        (40, "a", {"a": 3, "b": 1}, 30),
        (40, "b", {"a": 3, "b": 1}, 10),
        (40, "c", {"a": 3, "b": 1}, 8),  # unlisted tenant weighs 1: 40 * 1/5
        (3, "a", {"a": 1, "b": 1}, 1),  # floor: nobody takes the odd node by right
        (10, "a", {"a": 0, "b": 1}, 0),
    ],
)
def test_share_rule(max_nodes: int, tenant: str, weights: dict[str, float], expected: int) -> None:
    assert fairshare.share(float(max_nodes), tenant, weights) == expected


EDGE_SITE = "aws:af-south-1-los-1"
EDGE_POOL = f"{EDGE_SITE}/c5.2xlarge/ondemand"


def _scarce_catalog(broker: Broker) -> Any:
    """The real catalog, with the Lagos Local Zone made scarce: 4 nodes of one pool, none of the rest.

    (Importing a private site would do the same at the cost of rebuilding the whole catalog.)
    """
    cat = broker.catalog()
    t = cat.table
    at_site = t.site_idx == t.site_index[EDGE_SITE]
    max_nodes = np.where(at_site, 0.0, t.max_nodes)
    max_nodes[t.pool_index[EDGE_POOL]] = 4
    return dataclasses.replace(cat, table=dataclasses.replace(t, max_nodes=max_nodes))


def _edge_request(name: str, replicas: int) -> dict[str, Any]:
    return {
        "name": name,
        "user_regions": [{"name": "lagos", "site": EDGE_SITE}],
        # one replica per c5.2xlarge (8 vCPU / 16 GiB raw, less once reserved): one node each
        "workloads": [{"name": "w", "replicas": replicas, "cpu": 6, "memory_gib": 12, "latency_slo_ms": {"lagos": 1}}],
    }


def test_capped_table_subtracts_other_tenants_use(shared_broker: Broker) -> None:
    table = _scarce_catalog(shared_broker).table
    p = table.pool_index[EDGE_POOL]
    assert fairshare.capped_table(table, tenant="a", weights={}, others={}) is table
    capped = fairshare.capped_table(table, tenant="a", weights={}, others={EDGE_POOL: 3})
    assert capped.max_nodes[p] == 1
    shared = fairshare.capped_table(table, tenant="a", weights={"a": 1, "b": 1}, others={EDGE_POOL: 1})
    assert shared.max_nodes[p] == 2
    public = np.flatnonzero(np.isinf(table.max_nodes))
    assert np.isinf(shared.max_nodes[public]).all()  # unbounded pools are never capped
    assert table.max_nodes[p] == 4  # the catalog itself is untouched


def test_fair_share_caps_each_tenant_on_scarce_capacity(db_url: str) -> None:
    b = open_broker(db_url, auth="required", fair_share_weights={"alpha": 1, "beta": 1})
    scarce = _scarce_catalog(b)
    b.catalog = lambda: scarce  # type: ignore[method-assign]
    with service_client(b) as c:
        a, beta = key(b, "alpha", "planner"), key(b, "beta", "planner")
        # 4 nodes, equal weights: alpha may use 2, so 3 one-node replicas cannot fit
        too_many = c.post("/v1/placements", json=_edge_request("big", 3), headers=a)
        assert too_many.status_code == 422, too_many.text
        assert any("capacity" in x or "latency" in x for x in too_many.json()["conflicts"])
        ok = c.post("/v1/placements", json=_edge_request("two", 2), headers=a)
        assert ok.status_code == 201, ok.text
        assert {n["pool"]: n["count"] for n in ok.json()["nodes"]} == {EDGE_POOL: 2}
        # beta gets its half too, and no more
        assert c.post("/v1/placements", json=_edge_request("b2", 2), headers=beta).status_code == 201
        assert c.post("/v1/placements", json=_edge_request("b3", 3), headers=beta).status_code == 422


def test_other_tenants_use_is_unavailable_without_weights(db_url: str) -> None:
    b = open_broker(db_url, auth="required")
    scarce = _scarce_catalog(b)
    b.catalog = lambda: scarce  # type: ignore[method-assign]
    with service_client(b) as c:
        a, beta = key(b, "alpha", "planner"), key(b, "beta", "planner")
        assert c.post("/v1/placements", json=_edge_request("three", 3), headers=a).status_code == 201
        assert c.post("/v1/placements", json=_edge_request("two", 2), headers=beta).status_code == 422
        assert c.post("/v1/placements", json=_edge_request("one", 1), headers=beta).status_code == 201
        # a Pareto front offers only what the tenant may use, as a placement does: alpha holds 3 nodes
        assert c.post("/v1/placements/pareto", json=_edge_request("front", 2), headers=beta).status_code == 422
        front = c.post("/v1/placements/pareto", json=_edge_request("front", 1), headers=beta)
        assert front.status_code == 200, front.text
        cheapest = front.json()["cost_latency"][0]["placement"]
        assert {n["pool"]: n["count"] for n in cheapest["nodes"]} == {EDGE_POOL: 1}
        # alpha re-placing its own name does not count its old placement against itself
        assert c.post("/v1/placements", json=_edge_request("three", 3), headers=a).status_code == 201
