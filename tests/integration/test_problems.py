"""Every error answer is one kind of RFC 9457 document, with the HTTP status that means it,
and an async job that fails carries the very document the synchronous request got."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.deps import get_principal
from broker.access.keys import Principal, Role
from broker.app import Broker
from broker.errors import BrokerError, Forbidden
from broker.problems import error_problem
from tests.integration.service_support import key, open_broker, service_client, small_request

PROBLEM = "application/problem+json"


def _is_problem(r: Any, status: int, type_: str) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == PROBLEM
    doc: dict[str, Any] = r.json()
    assert doc["type"] == f"https://placement-broker.dev/problems/{type_}"
    assert doc["status"] == status and doc["title"] and doc["detail"] and doc["instance"].startswith("/")
    return doc


def _infeasible() -> dict[str, Any]:
    body = small_request("nope")
    body["workloads"][0]["cpu"] = 1000  # no node that large: no pool fits
    return body


def _unknown_site() -> dict[str, Any]:
    return small_request("lost") | {"user_regions": [{"name": "u", "site": "aws:atlantis-1"}]}


def _wait(c: TestClient, url: str) -> dict[str, Any]:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        job: dict[str, Any] = c.get(url).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {url} did not finish")


@pytest.mark.parametrize(
    ("make", "type_"), [(_infeasible, "infeasible"), (_unknown_site, "invalid-request")], ids=["infeasible", "invalid"]
)
def test_a_failed_job_carries_the_synchronous_problem_document(client: TestClient, make: Any, type_: str) -> None:
    sync = _is_problem(client.post("/v1/placements", json=make()), 422, type_)
    accepted = client.post("/v1/placements", json=make() | {"async": True})
    assert accepted.status_code == 202
    job = _wait(client, accepted.headers["location"])
    assert job["status"] == "failed"
    assert job["error"] == sync


def test_a_job_that_crashes_carries_the_internal_error_document(
    client: TestClient, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(Broker, "place", boom)
    job = _wait(client, client.post("/v1/placements", json=small_request("x", **{"async": True})).headers["location"])
    assert job["error"]["status"] == 500 and job["error"]["type"].endswith("/internal")
    assert "secret" not in json.dumps(job["error"])


def test_statuses_mean_what_http_says(db_url: str) -> None:
    b = open_broker(db_url, auth="required")
    with service_client(b) as c:
        # 401: no key, or a bad one; each says how to authenticate
        r = c.get("/v1/placements")
        assert _is_problem(r, 401, "unauthorized") and r.headers["www-authenticate"] == "Bearer"
        r = c.get("/v1/placements", headers={"Authorization": "Bearer pbk_nope"})
        assert _is_problem(r, 401, "unauthorized") and "invalid_token" in r.headers["www-authenticate"]
        # 403: a known key whose role may not do this
        viewer = key(b, "acme", "viewer")
        assert (
            "admin"
            in _is_problem(c.post("/v1/apikeys", json={"role": "admin"}, headers=viewer), 403, "forbidden")["detail"]
        )
        admin = key(b, "acme", "admin")
        # 404: an id that does not exist (or is another tenant's)
        _is_problem(c.get("/v1/placements/pl_missing", headers=admin), 404, "not-found")
        # 405 names the methods that are allowed
        r = c.put("/v1/placements", headers=admin)
        assert _is_problem(r, 405, "method-not-allowed") and "POST" in r.headers["allow"]
    b2 = open_broker(db_url, auth="off", rate_limit="2/minute", max_body_bytes=4000)
    with service_client(b2) as c:
        # 409: an Idempotency-Key reused with another body
        h = {"Idempotency-Key": "k1"}
        assert c.post("/v1/placements", json=small_request(dry_run=True), headers=h).status_code == 200
        _is_problem(
            c.post("/v1/placements", json=small_request("other", dry_run=True), headers=h),
            409,
            "idempotency-key-reused",
        )
        # 429 with Retry-After once the key's budget of requests is spent
        r = c.get("/v1/placements")
        assert _is_problem(r, 429, "rate-limited") and int(r.headers["retry-after"]) >= 1
    b3 = open_broker(db_url, max_body_bytes=4000)
    with service_client(b3) as c:
        # 413: a body over BROKER_MAX_BODY_BYTES, on any route
        big = json.dumps({"samples": [{"timestamp": 1, "value": 1}] * 400}).encode()
        r = c.post("/v1/workloads/web/usage", content=big, headers={"content-type": "application/json"})
        _is_problem(r, 413, "request-too-large")
        # 422: invalid input names the field
        doc = _is_problem(c.post("/v1/placements", json={"name": "x", "workloads": "no"}), 422, "invalid-request")
        assert doc["errors"][0]["loc"] == ["body", "workloads"]
    b4 = open_broker(db_url, request_timeout_s=0.001, sync_time_limit_s=0.0005)
    with service_client(b4) as c:
        # 504: the request outlived BROKER_REQUEST_TIMEOUT_S
        _is_problem(c.post("/v1/placements", json=small_request(dry_run=True)), 504, "timeout")


def test_a_route_that_needs_admin_answers_403(broker: Broker, client: TestClient) -> None:
    # AuthMiddleware refuses such keys first; the route's own check must mean the same
    client.app.dependency_overrides[get_principal] = lambda: Principal("default", Role.planner, "k1")  # type: ignore[attr-defined]
    try:
        doc = _is_problem(client.get("/v1/apikeys"), 403, "forbidden")
    finally:
        client.app.dependency_overrides.clear()  # type: ignore[attr-defined]
    assert "planner" in doc["detail"]


def test_an_unmapped_broker_error_is_a_bad_request() -> None:
    assert error_problem(BrokerError("odd"), instance="/x")["status"] == 400
    assert error_problem(Forbidden("no"), instance="/x")["status"] == 403
