"""Tenant isolation on every route of the app, table-driven.

Tenant "alpha" owns one of everything (placement, job, budget, API key, cluster,
dispatch, replan, usage series, savings ledger rows). Each entry of ISOLATION
probes one route as another tenant: ids of alpha's objects answer 404, lists and
aggregates are empty, writes land in the other tenant only, and alpha's objects
are unchanged afterwards (checked with alpha's key, so a probe that shows nothing
to anyone fails too). The other tenant is "beta", and also "default": a key of the
tenant that a local run without authentication uses must not see other tenants.

`test_every_tenant_route_is_in_the_isolation_table` enumerates `app.routes`: a
route that takes the caller's tenant (get_tenant / get_principal) must have an
entry, and every other /v1 route must be listed in SHARED with the reason it
holds no tenant data. A new route fails this test until someone decides which.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastapi.routing
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from httpx import Response

from api.deps import get_principal, get_tenant
from broker.app import Broker
from broker.forecast.model import TrainParams
from broker.usage.service import UsageStore
from tests.integration.conftest import BACKENDS, fresh_database
from tests.integration.dispatch_support import committed_docs, new_remote
from tests.integration.service_support import key, open_broker, service_client, small_request

PROBLEM = "application/problem+json"
LATENCY_PATH = {"from": "aws:us-east-1", "to": "aws:us-west-2"}
ALPHA_RTT = 55.5  # alpha's own measurement of LATENCY_PATH (the catalog says ~69 ms)
ALPHA_QUOTAS = [{"quota_group": "aws:Inf", "vcpus": 0.0}]  # alpha's family quotas (GET /v1/quotas)
SERIES = "alpha-web"
SAMPLES = 3 * 288  # three days of 5-minute samples: a model trains on more than a day
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


@dataclass
class World:
    c: TestClient
    broker: Broker
    a: dict[str, str]  # alpha's admin key
    pid: str
    job_id: str
    key_id: str
    cluster: str
    repo: Path  # alpha's GitOps repository (bare, served by file:// under BROKER_GITOPS_FILE_ROOTS)
    dispatch_id: str
    replan_id: str
    sim_id: str
    others: dict[str, dict[str, str]] = field(default_factory=dict)

    def other(self, tenant: str) -> dict[str, str]:
        if tenant not in self.others:
            self.others[tenant] = key(self.broker, tenant, "admin")
        return self.others[tenant]


def _wait_job(c: TestClient, job_id: str, h: dict[str, str]) -> None:
    for _ in range(600):
        if c.get(f"/v1/jobs/{job_id}", headers=h).json()["status"] in ("succeeded", "failed"):
            return
        time.sleep(0.05)
    raise AssertionError("job did not finish")


# a fleet simulation small enough to finish in a second: two workloads, one policy, 2.4 hours
SIMULATION: dict[str, Any] = {
    "fleet": {
        "name": "a-sim",
        "sites": ["aws:us-east-1"],
        "policies": {"kube-default": {"site": "aws:us-east-1", "instance_type": "m5.large"}},
        "workloads": [
            {"name": "web", "replicas": 2, "cpu": 0.5, "memory_gib": 1, "usage": {"series": "az1633748"}},
            {"name": "db", "replicas": 1, "cpu": 1, "memory_gib": 4, "usage": {"series": "bb195"}},
        ],
    },
    "policies": ["kube-default"],
    "days": 0.1,
}


def _wait_simulation(c: TestClient, sim_id: str, h: dict[str, str]) -> None:
    for _ in range(1200):
        if c.get(f"/v1/simulations/{sim_id}", headers=h).json()["status"] in ("succeeded", "failed", "cancelled"):
            return
        time.sleep(0.05)
    raise AssertionError("simulation did not finish")


@pytest.fixture(scope="module", params=BACKENDS)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("isolation")
    with fresh_database(request.param, request, tmp) as url:
        remotes = tmp / "remotes"
        b = open_broker(url, auth="required", gitops_file_roots=[str(remotes)], data_dir=str(tmp / "data"))
        with service_client(b) as c:
            a = key(b, "alpha", "admin")
            placed = c.post("/v1/placements", json=small_request("a-plan"), headers=a)
            assert placed.status_code == 201, placed.text
            pid = placed.json()["id"]
            job = c.post("/v1/placements", json=small_request("a-job", dry_run=True, **{"async": True}), headers=a)
            assert job.status_code == 202, job.text
            _wait_job(c, job.json()["id"], a)
            assert c.put("/v1/budgets", json={"monthly_usd": 100_000}, headers=a).status_code == 200
            key_id = c.post("/v1/apikeys", json={"role": "viewer", "name": "ci"}, headers=a).json()["id"]
            repo = new_remote(remotes / "fleet.git")
            sites = sorted({x["site"] for x in placed.json()["assignments"]})
            for i, site in enumerate(sites):
                body = {"name": f"a-c{i}", "site": site, "gitops_repo": repo.as_uri(), "namespace": "shop"}
                assert c.post("/v1/clusters", json=body, headers=a).status_code == 201
            dispatched = c.post(f"/v1/placements/{pid}/dispatch", json={}, headers=a)
            assert dispatched.status_code == 200 and dispatched.json()["state"] == "applied", dispatched.text
            replan = c.post(f"/v1/placements/{pid}/replan", json={}, headers=a)
            assert replan.status_code == 200, replan.text
            samples = [{"timestamp": T0 + 300 * i, "value": 1.0 + (i % 12) / 10} for i in range(SAMPLES)]
            assert c.post(f"/v1/workloads/{SERIES}/usage", json={"samples": samples}, headers=a).status_code == 201
            # alpha's own forecast model (`broker forecast train --tenant alpha`)
            UsageStore(b.sessions).train(horizon=12, params=TrainParams(rounds=5), tenant="alpha")
            measured = {"measurements": [{**LATENCY_PATH, "rtt_ms": ALPHA_RTT, "source": "alpha-probe"}]}
            assert c.post("/v1/latency/measurements", json=measured, headers=a).status_code == 201
            for q in ALPHA_QUOTAS:
                assert c.put("/v1/quotas", json=q, headers=a).status_code == 200
            sim = c.post("/v1/simulations", json=SIMULATION, headers=a)
            assert sim.status_code == 202, sim.text
            _wait_simulation(c, sim.json()["id"], a)
            yield World(
                c=c,
                broker=b,
                a=a,
                pid=pid,
                job_id=job.json()["id"],
                key_id=key_id,
                cluster="a-c0",
                repo=repo,
                dispatch_id=dispatched.json()["id"],
                replan_id=replan.json()["id"],
                sim_id=sim.json()["id"],
            )
        b.engine.dispose()


# ---- one probe per route: (method, path template) -> check, run as another tenant -------------

Probe = Callable[[World, dict[str, str]], None]


def _not_found(r: Response) -> None:
    assert r.status_code == 404, (r.status_code, r.text)
    assert r.headers["content-type"] == PROBLEM


def _ok(r: Response, status: int = 200) -> Any:
    assert r.status_code == status, (r.status_code, r.text)
    return r.json() if "json" in r.headers.get("content-type", "") else r.text


def placements_list(w: World, h: dict[str, str]) -> None:
    assert _ok(w.c.get("/v1/placements", headers=h))["total"] == 0
    assert _ok(w.c.get("/v1/placements", params={"name": "a-plan"}, headers=h))["items"] == []
    assert w.pid in {p["id"] for p in _ok(w.c.get("/v1/placements", headers=w.a))["items"]}


def placements_get(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.get(f"/v1/placements/{w.pid}", headers=h))
    assert _ok(w.c.get(f"/v1/placements/{w.pid}", headers=w.a))["id"] == w.pid


def karmada_get(w: World, h: dict[str, str]) -> None:
    url = f"/v1/integrations/karmada/placements/{w.pid}"
    _not_found(w.c.get(url, headers=h))
    sites = {a["site"] for a in _ok(w.c.get(f"/v1/placements/{w.pid}", headers=w.a))["assignments"]}
    mine = w.c.get(url, params={"member": [f"{s}=m{i}" for i, s in enumerate(sorted(sites))]}, headers=w.a)
    assert mine.status_code == 200 and "PropagationPolicy" in mine.text


def placements_post(w: World, h: dict[str, str]) -> None:
    # the same name in another tenant is another placement: alpha's is neither replaced nor charged
    mine = _ok(w.c.post("/v1/placements", json=small_request("a-plan", allow_over_budget=True), headers=h), 201)
    assert mine["id"] != w.pid
    assert [p["id"] for p in _ok(w.c.get("/v1/placements", params={"name": "a-plan"}, headers=w.a))["items"]] == [w.pid]
    alpha = _ok(w.c.get("/v1/budgets", headers=w.a))
    assert alpha["committed_per_month"] == pytest.approx(_placement_cost(w) * 730, abs=0.02)


def _placement_cost(w: World) -> float:
    return float(_ok(w.c.get(f"/v1/placements/{w.pid}", headers=w.a))["cost_per_hour"])


def jobs_list(w: World, h: dict[str, str]) -> None:
    assert _ok(w.c.get("/v1/jobs", headers=h))["total"] == 0
    assert w.job_id in {j["id"] for j in _ok(w.c.get("/v1/jobs", headers=w.a))["items"]}


def jobs_get(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.get(f"/v1/jobs/{w.job_id}", headers=h))
    assert _ok(w.c.get(f"/v1/jobs/{w.job_id}", headers=w.a))["status"] == "succeeded"


def budgets_get(w: World, h: dict[str, str]) -> None:
    assert _ok(w.c.get("/v1/budgets", headers=h))["budgets"] == []
    assert [x["monthly_usd"] for x in _ok(w.c.get("/v1/budgets", headers=w.a))["budgets"]] == [100_000]


def budgets_put(w: World, h: dict[str, str]) -> None:
    _ok(w.c.put("/v1/budgets", json={"monthly_usd": 1}, headers=h))
    try:
        assert [x["monthly_usd"] for x in _ok(w.c.get("/v1/budgets", headers=w.a))["budgets"]] == [100_000]
    finally:
        w.c.delete("/v1/budgets", headers=h)


def budgets_delete(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.delete("/v1/budgets", headers=h))  # this tenant has none; alpha's is not touched
    assert [x["monthly_usd"] for x in _ok(w.c.get("/v1/budgets", headers=w.a))["budgets"]] == [100_000]


def apikeys_list(w: World, h: dict[str, str]) -> None:
    ids = {k["id"] for k in _ok(w.c.get("/v1/apikeys", headers=h))}
    assert w.key_id not in ids and ids
    assert w.key_id in {k["id"] for k in _ok(w.c.get("/v1/apikeys", headers=w.a))}


def apikeys_post(w: World, h: dict[str, str]) -> None:
    made = _ok(w.c.post("/v1/apikeys", json={"role": "viewer"}, headers=h), 201)
    assert made["tenant"] != "alpha"
    assert made["id"] not in {k["id"] for k in _ok(w.c.get("/v1/apikeys", headers=w.a))}


def apikeys_delete(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.delete(f"/v1/apikeys/{w.key_id}", headers=h))
    mine = {k["id"]: k for k in _ok(w.c.get("/v1/apikeys", headers=w.a))}
    assert mine[w.key_id]["revoked_at"] is None


def whoami(w: World, h: dict[str, str]) -> None:
    assert _ok(w.c.get("/v1/whoami", headers=h))["tenant"] != "alpha"
    assert _ok(w.c.get("/v1/whoami", headers=w.a))["tenant"] == "alpha"


def clusters_list(w: World, h: dict[str, str]) -> None:
    assert _ok(w.c.get("/v1/clusters", headers=h)) == []
    assert w.cluster in {x["name"] for x in _ok(w.c.get("/v1/clusters", headers=w.a))}


def clusters_get(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.get(f"/v1/clusters/{w.cluster}", headers=h))
    assert _ok(w.c.get(f"/v1/clusters/{w.cluster}", headers=w.a))["gitops_repo"] == w.repo.as_uri()


def clusters_delete(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.delete(f"/v1/clusters/{w.cluster}", headers=h))
    _ok(w.c.get(f"/v1/clusters/{w.cluster}", headers=w.a))


def clusters_post(w: World, h: dict[str, str]) -> None:
    # alpha's cluster name is free in another tenant (a 409 would reveal that it exists)
    own = new_remote(w.repo.parent / f"other-{uuid.uuid4().hex[:6]}.git")
    body = {"name": w.cluster, "site": "aws:eu-central-1", "gitops_repo": own.as_uri()}
    try:
        _ok(w.c.post("/v1/clusters", json=body, headers=h), 201)
        assert _ok(w.c.get(f"/v1/clusters/{w.cluster}", headers=w.a))["gitops_repo"] == w.repo.as_uri()
        assert _ok(w.c.get(f"/v1/clusters/{w.cluster}", headers=h))["gitops_repo"] == own.as_uri()
    finally:
        w.c.delete(f"/v1/clusters/{w.cluster}", headers=h)


def dispatch_post(w: World, h: dict[str, str]) -> None:
    before = committed_docs(w.repo)
    _not_found(w.c.post(f"/v1/placements/{w.pid}/dispatch", json={"dry_run": True}, headers=h))
    _not_found(w.c.post(f"/v1/placements/{w.pid}/dispatch", json={}, headers=h))
    assert committed_docs(w.repo) == before


def dispatch_status(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.get(f"/v1/placements/{w.pid}/dispatch", headers=h))
    assert _ok(w.c.get(f"/v1/placements/{w.pid}/dispatch", headers=w.a))["id"] == w.dispatch_id


def dispatches_get(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.get(f"/v1/dispatches/{w.dispatch_id}", headers=h))
    assert _ok(w.c.get(f"/v1/dispatches/{w.dispatch_id}", headers=w.a))["state"] == "applied"


def replan_post(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.post(f"/v1/placements/{w.pid}/replan", json={"dry_run": True}, headers=h))


def replans_get(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.get(f"/v1/replans/{w.replan_id}", headers=h))
    assert _ok(w.c.get(f"/v1/replans/{w.replan_id}", headers=w.a))["placement_id"] == w.pid


def alerts_post(w: World, h: dict[str, str]) -> None:
    # a site-down alert naming alpha's cluster or alpha's site replans nothing of alpha's
    site = _ok(w.c.get(f"/v1/clusters/{w.cluster}", headers=w.a))["site"]
    body = {
        "alerts": [
            {"labels": {"alertname": "SiteDown", "broker_action": "site_down", "cluster": w.cluster}},
            {"labels": {"alertname": "SiteDown", "broker_action": "site_down", "site": site}},
        ]
    }
    out = _ok(w.c.post("/v1/alerts", params={"dry_run": "true"}, json=body, headers=h))
    assert w.pid not in {r["placement_id"] for r in out["replans"]} | {e["placement_id"] for e in out["errors"]}
    assert [x["index"] for x in out["ignored"]] == [0]  # alpha's cluster name means nothing here
    mine = _ok(w.c.post("/v1/alerts", params={"dry_run": "true"}, json=body, headers=w.a))
    assert {r["placement_id"] for r in mine["replans"]} == {w.pid}


def usage_post(w: World, h: dict[str, str]) -> None:
    before = _ok(w.c.get(f"/v1/workloads/{SERIES}/usage", headers=w.a))
    samples = [{"timestamp": T0 + 300 * i, "value": 50.0} for i in range(10)]
    _ok(w.c.post(f"/v1/workloads/{SERIES}/usage", json={"samples": samples}, headers=h), 201)
    assert _ok(w.c.get(f"/v1/workloads/{SERIES}/usage", headers=w.a)) == before


def usage_get(w: World, h: dict[str, str]) -> None:
    other = w.c.get(f"/v1/workloads/{SERIES}/usage", headers=h)
    # 404, or (after usage_post ran for this tenant) only this tenant's own 10 samples
    if other.status_code != 404:
        assert _ok(other)["metrics"]["cpu"]["samples"] == 10
    assert _ok(w.c.get(f"/v1/workloads/{SERIES}/usage", headers=w.a))["metrics"]["cpu"]["samples"] == SAMPLES


def forecast_get(w: World, h: dict[str, str]) -> None:
    q = {"horizon": 12}
    other = w.c.get(f"/v1/workloads/{SERIES}/forecast", params=q, headers=h)
    if other.status_code != 404:  # forecast from this tenant's own 10 samples of 50 cores
        assert min(_ok(other)["p50"]) > 10
        assert _ok(other)["model_version"] is None  # alpha's model forecasts for alpha only
    mine = _ok(w.c.get(f"/v1/workloads/{SERIES}/forecast", params=q, headers=w.a))
    assert len(mine["p50"]) == 12 and max(mine["p95"]) < 10
    assert mine["model_version"] == _alpha_model(w)["version"]


def _alpha_model(w: World) -> dict[str, Any]:
    (model,) = _ok(w.c.get("/v1/forecast/models", headers=w.a))["items"]
    assert model["tenant"] == "alpha"
    return model


def forecast_models_get(w: World, h: dict[str, str]) -> None:
    """A model learned from alpha's usage: its version and hold-out metrics are alpha's to see."""
    version = _alpha_model(w)["version"]
    assert version not in {m["version"] for m in _ok(w.c.get("/v1/forecast/models", headers=h))["items"]}


def latency_get(w: World, h: dict[str, str]) -> None:
    other = _ok(w.c.get("/v1/latency", params=LATENCY_PATH, headers=h))
    assert other["rtt_ms"] != ALPHA_RTT
    mine = _ok(w.c.get("/v1/latency", params=LATENCY_PATH, headers=w.a))
    assert mine["rtt_ms"] == ALPHA_RTT and mine["method"] == "imported"


def latency_matrix_get(w: World, h: dict[str, str]) -> None:
    params = {"from": LATENCY_PATH["from"], "to": LATENCY_PATH["to"]}
    (other,) = _ok(w.c.get("/v1/latency/matrix", params=params, headers=h))["items"]
    assert other["rtt_ms"] != ALPHA_RTT
    (mine,) = _ok(w.c.get("/v1/latency/matrix", params=params, headers=w.a))["items"]
    assert mine["rtt_ms"] == ALPHA_RTT and mine["method"] == "imported"


def quotas_get(w: World, h: dict[str, str]) -> None:
    assert _ok(w.c.get("/v1/quotas", headers=h))["quotas"] == []
    assert _ok(w.c.get("/v1/quotas", headers=w.a))["quotas"] == ALPHA_QUOTAS


def quotas_put(w: World, h: dict[str, str]) -> None:
    _ok(w.c.put("/v1/quotas", json={"quota_group": "aws:Inf", "vcpus": 96}, headers=h))
    try:
        assert _ok(w.c.get("/v1/quotas", headers=w.a))["quotas"] == ALPHA_QUOTAS
    finally:
        w.c.delete("/v1/quotas", params={"quota_group": "aws:Inf"}, headers=h)


def quotas_delete(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.delete("/v1/quotas", params={"quota_group": "aws:Inf"}, headers=h))  # alpha's is not touched
    assert _ok(w.c.get("/v1/quotas", headers=w.a))["quotas"] == ALPHA_QUOTAS


def pricing_refresh_post(w: World, h: dict[str, str]) -> None:
    # a refresh is a job of the tenant that asked (from a feed nobody serves: it fails at once)
    body = {"provider": "azure", "regions": ["westeurope"], "endpoint": "http://127.0.0.1:1"}
    job = _ok(w.c.post("/v1/pricing/refresh", json=body, headers=h), 202)
    _not_found(w.c.get(f"/v1/jobs/{job['id']}", headers=w.a))
    assert job["id"] not in {j["id"] for j in _ok(w.c.get("/v1/jobs", headers=w.a))["items"]}
    assert job["id"] in {j["id"] for j in _ok(w.c.get("/v1/jobs", headers=h))["items"]}


def latency_measurements_post(w: World, h: dict[str, str]) -> None:
    body = {"measurements": [{**LATENCY_PATH, "rtt_ms": 44.4, "source": "alpha-probe"}]}  # alpha's path and source
    assert _ok(w.c.post("/v1/latency/measurements", json=body, headers=h), 201)["replaced"] == 0
    assert _ok(w.c.get("/v1/latency", params=LATENCY_PATH, headers=h))["rtt_ms"] == 44.4
    assert _ok(w.c.get("/v1/latency", params=LATENCY_PATH, headers=w.a))["rtt_ms"] == ALPHA_RTT


def latency_measurements_get(w: World, h: dict[str, str]) -> None:
    assert ALPHA_RTT not in {m["rtt_ms"] for m in _ok(w.c.get("/v1/latency/measurements", headers=h))["items"]}
    assert [m["rtt_ms"] for m in _ok(w.c.get("/v1/latency/measurements", headers=w.a))["items"]] == [ALPHA_RTT]


# one replica pinned to aws:us-east-1, its users at aws:us-west-2: a point's latency is that path's RTT
PARETO_REQUEST: dict[str, Any] = {
    "name": "a-front",
    "user_regions": [{"name": "west", "site": LATENCY_PATH["to"]}],
    "workloads": [
        {
            "name": "api",
            "replicas": 1,
            "cpu": 1,
            "memory_gib": 2,
            "providers": ["aws"],
            "requirements": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-east-1"]}],
        }
    ],
    "time_limit_s": 5,
}


def pareto_post(w: World, h: dict[str, str]) -> None:
    """A front is solved for the caller: alpha's own RTT measurement prices alpha's points only."""

    def latencies(headers: dict[str, str]) -> set[float]:
        doc = _ok(w.c.post("/v1/placements/pareto", json=PARETO_REQUEST, headers=headers))
        return {p["latency_ms"] for p in doc["cost_latency"]}

    assert latencies(w.a) == {ALPHA_RTT}
    assert ALPHA_RTT not in latencies(h)


def savings_get(w: World, h: dict[str, str]) -> None:
    q = {"group_by": "tenant"}
    assert "alpha" not in {g["key"] for g in _ok(w.c.get("/v1/savings", params=q, headers=h))["groups"]}
    _not_found(w.c.get("/v1/savings", params={**q, "tenant": "alpha"}, headers=h))
    assert {g["key"] for g in _ok(w.c.get("/v1/savings", params=q, headers=w.a))["groups"]} == {"alpha"}


def focus_get(w: World, h: dict[str, str]) -> None:
    assert w.pid not in _ok(w.c.get("/v1/export/focus", headers=h))
    _not_found(w.c.get("/v1/export/focus", params={"tenant": "alpha"}, headers=h))
    assert w.pid in _ok(w.c.get("/v1/export/focus", headers=w.a))


def dashboard_get(w: World, h: dict[str, str]) -> None:
    doc = _ok(w.c.get("/v1/dashboard", headers=h))
    assert w.pid not in {x["id"] for x in doc["latest"]} and "alpha" not in doc["tenants"]
    assert "alpha" not in {g["key"] for g in doc["by"]["tenant"]}
    _not_found(w.c.get("/v1/dashboard", params={"tenant": "alpha"}, headers=h))
    assert w.pid in {x["id"] for x in _ok(w.c.get("/v1/dashboard", headers=w.a))["latest"]}


def simulations_list(w: World, h: dict[str, str]) -> None:
    assert _ok(w.c.get("/v1/simulations", headers=h))["total"] == 0
    assert w.sim_id in {x["id"] for x in _ok(w.c.get("/v1/simulations", headers=w.a))["items"]}


def simulations_get(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.get(f"/v1/simulations/{w.sim_id}", headers=h))
    assert _ok(w.c.get(f"/v1/simulations/{w.sim_id}", headers=w.a))["status"] == "succeeded"


def simulations_post(w: World, h: dict[str, str]) -> None:
    mine = _ok(w.c.post("/v1/simulations", json=SIMULATION, headers=h), 202)
    _wait_simulation(w.c, mine["id"], h)
    _not_found(w.c.get(f"/v1/simulations/{mine['id']}", headers=w.a))
    assert [x["id"] for x in _ok(w.c.get("/v1/simulations", headers=w.a))["items"]] == [w.sim_id]


def simulations_cancel(w: World, h: dict[str, str]) -> None:
    _not_found(w.c.post(f"/v1/simulations/{w.sim_id}/cancel", headers=h))
    assert _ok(w.c.get(f"/v1/simulations/{w.sim_id}", headers=w.a))["status"] == "succeeded"


ISOLATION: dict[tuple[str, str], Probe] = {
    ("GET", "/v1/placements"): placements_list,
    ("GET", "/v1/placements/{placement_id}"): placements_get,
    ("POST", "/v1/placements"): placements_post,
    ("POST", "/v1/placements/pareto"): pareto_post,
    ("GET", "/v1/jobs"): jobs_list,
    ("GET", "/v1/jobs/{job_id}"): jobs_get,
    ("GET", "/v1/budgets"): budgets_get,
    ("PUT", "/v1/budgets"): budgets_put,
    ("DELETE", "/v1/budgets"): budgets_delete,
    ("GET", "/v1/apikeys"): apikeys_list,
    ("POST", "/v1/apikeys"): apikeys_post,
    ("DELETE", "/v1/apikeys/{key_id}"): apikeys_delete,
    ("GET", "/v1/whoami"): whoami,
    ("GET", "/v1/clusters"): clusters_list,
    ("GET", "/v1/clusters/{name}"): clusters_get,
    ("DELETE", "/v1/clusters/{name}"): clusters_delete,
    ("POST", "/v1/clusters"): clusters_post,
    ("POST", "/v1/placements/{placement_id}/dispatch"): dispatch_post,
    ("GET", "/v1/placements/{placement_id}/dispatch"): dispatch_status,
    ("GET", "/v1/dispatches/{dispatch_id}"): dispatches_get,
    ("POST", "/v1/placements/{placement_id}/replan"): replan_post,
    ("GET", "/v1/replans/{replan_id}"): replans_get,
    ("POST", "/v1/alerts"): alerts_post,
    ("POST", "/v1/workloads/{name}/usage"): usage_post,
    ("GET", "/v1/workloads/{name}/usage"): usage_get,
    ("GET", "/v1/workloads/{name}/forecast"): forecast_get,
    ("GET", "/v1/forecast/models"): forecast_models_get,
    ("GET", "/v1/latency"): latency_get,
    ("GET", "/v1/latency/matrix"): latency_matrix_get,
    ("GET", "/v1/quotas"): quotas_get,
    ("PUT", "/v1/quotas"): quotas_put,
    ("DELETE", "/v1/quotas"): quotas_delete,
    ("POST", "/v1/pricing/refresh"): pricing_refresh_post,
    ("POST", "/v1/latency/measurements"): latency_measurements_post,
    ("GET", "/v1/latency/measurements"): latency_measurements_get,
    ("GET", "/v1/savings"): savings_get,
    ("GET", "/v1/export/focus"): focus_get,
    ("GET", "/v1/dashboard"): dashboard_get,
    ("GET", "/v1/integrations/karmada/placements/{placement_id}"): karmada_get,
    ("GET", "/v1/simulations"): simulations_list,
    ("GET", "/v1/simulations/{sim_id}"): simulations_get,
    ("POST", "/v1/simulations"): simulations_post,
    ("POST", "/v1/simulations/{sim_id}/cancel"): simulations_cancel,
}

# /v1 routes that hold no tenant data, each with the reason
SHARED: dict[tuple[str, str], str] = {
    ("GET", "/v1/sites"): "the catalog is shared by every tenant",
    ("POST", "/v1/sites"): "catalog write (admin)",
    ("GET", "/v1/pools"): "catalog",
    ("GET", "/v1/pools/{pool_id:path}"): "catalog",
    ("GET", "/v1/pools/{pool_id:path}/history"): "catalog price history",
    ("GET", "/v1/policies"): "residency policies",
    ("GET", "/v1/pricing/jobs/{job_id}"): "catalog price refresh jobs",
    ("GET", "/v1/pricing/status"): "catalog price freshness",
    ("GET", "/v1/pricing/discounts"): "catalog discount rules",
    ("POST", "/v1/pricing/discounts"): "catalog discount rules (admin)",
    ("POST", "/v1/pricing/commitments"): "catalog capacity (admin)",
    ("GET", "/v1/integrations/karpenter/nodeoverlays"): "catalog discount rules and commitments as Karpenter objects",
}


def _app_routes(app: Any) -> dict[tuple[str, str], APIRoute]:
    """(method, full path) -> route, through included routers (FastAPI >= 0.165 keeps them nested)."""
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    if contexts is None:
        return {(m, r.path): r for r in app.routes if isinstance(r, APIRoute) for m in r.methods}
    return {(m, c.path): c.route for c in contexts(app.routes) if isinstance(c.route, APIRoute) for m in c.methods}


def _takes_tenant(route: APIRoute) -> bool:
    stack = [route.dependant]
    while stack:
        d = stack.pop()
        if d.call in (get_tenant, get_principal):
            return True
        stack.extend(d.dependencies)
    return False


def test_every_tenant_route_is_in_the_isolation_table(world: World) -> None:
    routes = _app_routes(world.c.app)
    assert len(routes) > 40  # the enumeration sees every router
    v1 = {k for k in routes if k[1].startswith("/v1")}
    tenant_routes = {k for k, r in routes.items() if _takes_tenant(r)}
    assert tenant_routes - set(ISOLATION) == set(), "tenant routes without an isolation probe"
    assert tenant_routes & set(SHARED) == set(), "a route that takes the tenant cannot be shared"
    assert v1 - set(ISOLATION) - set(SHARED) == set(), "new /v1 routes: add a probe or a SHARED reason"
    assert set(ISOLATION) | set(SHARED) <= v1, "stale table entries"


@pytest.mark.parametrize("other", ["beta", "default"])
@pytest.mark.parametrize("route", list(ISOLATION), ids=[f"{m} {p}" for m, p in ISOLATION])
def test_other_tenants_get_404_or_nothing(world: World, route: tuple[str, str], other: str) -> None:
    ISOLATION[route](world, world.other(other))


def test_auth_off_local_user_still_sees_every_tenant(world: World) -> None:
    """Without a key (authentication off, loopback) the single local user may pick any tenant."""
    b = open_broker(str(world.broker.settings.database_url), auth="off")
    with service_client(b) as c:
        groups = c.get("/v1/savings", params={"group_by": "tenant", "tenant": "alpha"}).json()["groups"]
        assert {g["key"] for g in groups} == {"alpha"}
        dash = c.get("/v1/dashboard").json()
        assert "alpha" in dash["tenants"]
        # what the dashboard lists, the API shows: each latest placement reads by its id
        assert world.pid in {x["id"] for x in dash["latest"]}
        for row in dash["latest"]:
            got = c.get(f"/v1/placements/{row['id']}")
            assert got.status_code == 200, got.text
            assert got.json()["id"] == row["id"]
        assert c.get("/v1/placements/pl_nope").status_code == 404
    b.engine.dispose()
