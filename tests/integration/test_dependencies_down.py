"""The database or the job queue down: 503 problem+json with Retry-After (never a 500 `internal`),
nothing queued that a client was told failed, and /healthz naming the dependency that is down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from broker.app import Broker
from broker.jobs import worker
from broker.jobs.simulations import SimulationService
from broker.jobs.store import JobStore
from tests.integration.conftest import fresh_database
from tests.integration.service_support import key, open_broker, service_client, small_request
from tests.integration.test_simulations_api import small_fleet

# nothing listens on port 1: connections are refused at once, as with Redis stopped
NO_REDIS = "redis://127.0.0.1:1/0"


def _is_503(r: Any, kind: str) -> dict[str, Any]:
    assert r.status_code == 503, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert int(r.headers["retry-after"]) > 0
    doc: dict[str, Any] = r.json()
    assert doc["type"].endswith(f"/{kind}") and doc["status"] == 503, doc
    return doc


# ---- Redis down ------------------------------------------------------------------------------


@pytest.fixture()
def no_redis(db_url: str) -> Iterator[Broker]:
    b = open_broker(db_url, redis_url=NO_REDIS, auth="required")
    yield b
    b.close()


def test_an_async_placement_the_queue_cannot_take_is_a_503_and_leaves_no_job(no_redis: Broker) -> None:
    with service_client(no_redis) as c:
        h = key(no_redis, "alpha", "planner")
        r = c.post("/v1/placements", json=small_request("no-queue", **{"async": True}), headers=h)
        doc = _is_503(r, "queue-unavailable")
        assert "queue" in doc["detail"] and doc["instance"] == "/v1/placements"
        assert c.get("/v1/jobs", headers=h).json()["total"] == 0
    # nothing is left for a later start or a worker to run
    assert JobStore(no_redis.sessions).pending_ids() == []


def test_a_simulation_the_queue_cannot_take_is_a_503_and_leaves_nothing(no_redis: Broker) -> None:
    with service_client(no_redis) as c:
        h = key(no_redis, "alpha", "planner")
        r = c.post("/v1/simulations", json={"fleet": small_fleet(), "days": 0.25}, headers=h)
        _is_503(r, "queue-unavailable")
        assert c.get("/v1/simulations", headers=h).json()["total"] == 0
        assert c.get("/v1/jobs", headers=h).json()["total"] == 0
    assert SimulationService(no_redis).list(tenant="alpha")[1] == 0


def test_healthz_reports_the_queue_down(no_redis: Broker) -> None:
    with service_client(no_redis) as c:
        doc = _is_503(c.get("/healthz"), "queue-unavailable")
        assert doc["checks"] == {"database": "ok", "queue": "unavailable"}


def test_healthz_ok_keeps_its_fields_and_names_the_checks(client: TestClient) -> None:
    h = client.get("/healthz")
    assert h.status_code == 200
    doc = h.json()
    assert doc["status"] == "ok" and doc["pools"] > 150_000 and doc["sites"] > 150 and doc["catalog_version"]
    assert doc["checks"] == {"database": "ok", "queue": "ok"} and doc["queue"] == "in-process"


def test_a_worker_never_runs_a_job_withdrawn_after_a_failed_enqueue(no_redis: Broker, db_url: str) -> None:
    with service_client(no_redis) as c:
        h = key(no_redis, "alpha", "planner")
        assert c.post("/v1/placements", json=small_request("x", **{"async": True}), headers=h).status_code == 503
    local = open_broker(db_url)  # a worker without Redis polls the database
    try:
        assert worker.serve(local, burst=True) == 0
    finally:
        local.close()


# ---- PostgreSQL down -------------------------------------------------------------------------


@pytest.fixture()
def pg_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database("postgresql", request, tmp_path) as url:
        yield url


def _stop_accepting(admin: Engine, name: str, *, allow: bool) -> None:
    with admin.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allow).lower()}'))
        if not allow:  # and drop the connections open now, as a restarting server does
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"), {"n": name})


@pytest.mark.postgres
def test_postgresql_down_is_a_503_on_routes_middleware_and_healthz(pg_url: str, pg_server: Engine) -> None:
    name = pg_url.rsplit("/", 1)[1]
    b = open_broker(pg_url, auth="required")
    try:
        with TestClient(_app(b), raise_server_exceptions=False) as c:
            seen, unseen = key(b, "alpha", "planner"), key(b, "alpha", "planner")
            assert c.get("/v1/jobs", headers=seen).status_code == 200  # its key is cached now
            assert c.get("/healthz").status_code == 200
            _stop_accepting(pg_server, name, allow=False)
            try:
                # a route's query fails (the key was verified before)
                r = c.post("/v1/placements", json=small_request("down", **{"async": True}), headers=seen)
                _is_503(r, "database-unavailable")
                assert _is_503(c.get("/v1/jobs", headers=seen), "database-unavailable")["instance"] == "/v1/jobs"
                # the auth middleware's key lookup fails
                _is_503(c.post("/v1/placements", json=small_request("down"), headers=unseen), "database-unavailable")
                doc = _is_503(c.get("/healthz"), "database-unavailable")
                assert doc["checks"]["database"] == "unavailable"
            finally:
                _stop_accepting(pg_server, name, allow=True)
            assert c.get("/healthz").status_code == 200  # back once the database is
            assert c.get("/v1/jobs", headers=unseen).status_code == 200
    finally:
        b.close()


def _app(b: Broker) -> Any:
    from api.app import create_app

    return create_app(broker=b)
