"""Idempotency-Key and async jobs: in-process and on a real Redis (the `redis_url` fixture) with rq."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from broker.access.idempotency import IdempotencyStore
from broker.app import Broker
from broker.jobs import worker
from broker.jobs.store import JobStore
from tests.integration.service_support import key, open_broker, service_client, small_request

pytestmark = pytest.mark.both_backends  # idempotency and jobs on SQLite and PostgreSQL


def _wait(c: TestClient, url: str, headers: dict[str, str], timeout: float = 60) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job: dict[str, Any] = c.get(url, headers=headers).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {url} did not finish")


# ---- idempotency -----------------------------------------------------------------------------


def test_same_key_same_body_is_answered_once(client: TestClient) -> None:
    h = {"Idempotency-Key": "deploy-42"}
    first = client.post("/v1/placements", json=small_request("idem"), headers=h)
    again = client.post("/v1/placements", json=small_request("idem"), headers=h)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert client.get("/v1/placements", params={"name": "idem"}).json()["total"] == 1  # stored once
    other = client.post("/v1/placements", json=small_request("idem", replicas=3), headers=h)
    assert other.status_code == 409 and other.json()["type"].endswith("idempotency-key-reused")
    fresh = client.post("/v1/placements", json=small_request("idem"), headers={"Idempotency-Key": "deploy-43"})
    assert fresh.status_code == 201 and fresh.json()["id"] != first.json()["id"]


def test_errors_are_replayed_but_keys_are_per_api_key(db_url: str) -> None:
    b = open_broker(db_url, auth="required")
    with service_client(b) as c:
        a, other = key(b, "alpha", "admin"), key(b, "alpha", "admin")
        bad = {"name": "x", "workloads": []}
        r1 = c.post("/v1/placements", json=bad, headers={**a, "Idempotency-Key": "k"})
        r2 = c.post("/v1/placements", json=bad, headers={**a, "Idempotency-Key": "k"})
        assert r1.status_code == r2.status_code == 422 and r1.json() == r2.json()
        # the same key string from another API key is another request
        r3 = c.post("/v1/placements", json=small_request(dry_run=True), headers={**other, "Idempotency-Key": "k"})
        assert r3.status_code == 200


def test_a_key_still_in_flight_is_a_conflict(broker: Broker, client: TestClient) -> None:
    IdempotencyStore(broker.sessions).begin("local", "busy", "0" * 64)
    r = client.post("/v1/placements", json=small_request(dry_run=True), headers={"Idempotency-Key": "busy"})
    assert r.status_code == 409 and r.headers["retry-after"] == "1"


def test_idempotent_async_submission_queues_one_job(client: TestClient) -> None:
    body = small_request("idem-job", **{"async": True})
    h = {"Idempotency-Key": "job-1"}
    a = client.post("/v1/placements", json=body, headers=h)
    b = client.post("/v1/placements", json=body, headers=h)
    assert a.status_code == b.status_code == 202 and a.json()["id"] == b.json()["id"]
    assert client.get("/v1/jobs").json()["total"] == 1


# ---- async jobs in process -------------------------------------------------------------------


def test_async_placement_runs_in_process_and_is_polled(client: TestClient) -> None:
    r = client.post("/v1/placements", json=small_request("later", **{"async": True}))
    assert r.status_code == 202 and r.json()["status"] == "queued"
    job = _wait(client, r.headers["location"], {})
    assert job["status"] == "succeeded" and job["attempts"] == 1
    placed = client.get(f"/v1/placements/{job['placement_id']}").json()
    assert placed["id"] == job["result"]["id"] and placed["name"] == "later"
    # one format for each time, whatever the backend keeps (SQLite keeps no offset)
    assert r.json()["created_at"] == job["created_at"]
    for field in ("created_at", "started_at", "finished_at"):
        assert datetime.fromisoformat(job[field]).utcoffset() == timedelta(0), (field, job[field])


def test_large_requests_go_async_and_failures_carry_the_problem(db_url: str) -> None:
    b = open_broker(db_url, max_workloads_sync=1)
    with service_client(b) as c:
        body = small_request("wide")
        body["workloads"].append({**body["workloads"][0], "name": "api2"})
        assert c.post("/v1/placements", json=body).status_code == 202
        impossible = small_request("nope")
        impossible["workloads"][0]["cpu"] = 1000
        impossible["workloads"].append({**body["workloads"][0], "name": "api2"})
        job = _wait(c, c.post("/v1/placements", json=impossible).headers["location"], {})
        assert job["status"] == "failed" and job["error"]["type"].endswith("/infeasible") and job["error"]["conflicts"]


def test_queued_jobs_survive_an_api_restart_in_process(broker: Broker) -> None:
    # a job accepted by an API process that stopped before running it
    job = JobStore(broker.sessions).create(tenant="default", request=small_request("orphan"))
    with service_client(broker) as c:  # the next start re-enqueues it
        done = _wait(c, f"/v1/jobs/{job['id']}", {})
    assert done["status"] == "succeeded" and done["result"]["name"] == "orphan"


def test_a_job_is_claimed_once(broker: Broker) -> None:
    store = JobStore(broker.sessions)
    job = store.create(tenant="default", request=small_request("once"))
    assert store.claim(job["id"]) is not None
    assert store.claim(job["id"]) is None


# ---- async jobs on Redis (rq) ----------------------------------------------------------------


@pytest.fixture()
def redis_broker(db_url: str, redis_url: str) -> Any:
    from redis import Redis

    queue = f"test-{uuid.uuid4().hex[:8]}"
    b = open_broker(db_url, redis_url=redis_url, queue_name=queue, auth="required")
    yield b
    conn = Redis.from_url(redis_url)
    for k in conn.scan_iter(f"rq:*{queue}*"):
        conn.delete(k)


def test_redis_jobs_survive_an_api_restart_and_run_on_the_worker(redis_broker: Broker) -> None:
    with service_client(redis_broker) as c:
        h = key(redis_broker, "alpha", "planner")
        accepted = c.post("/v1/placements", json=small_request("via-redis", **{"async": True}), headers=h)
        assert accepted.status_code == 202
        url = accepted.headers["location"]
        assert c.get(url, headers=h).json()["status"] == "queued"  # no worker yet
        assert "broker_job_queue_depth 1.0" in c.get("/metrics").text
    # the API is gone; a new one and a worker start
    with service_client(redis_broker) as c:
        worker.serve(redis_broker, burst=True)
        job = c.get(url, headers=h).json()
        assert job["status"] == "succeeded" and job["result"]["name"] == "via-redis"
        assert c.get(f"/v1/placements/{job['placement_id']}", headers=h).status_code == 200
        assert c.get(url, headers=key(redis_broker, "beta", "admin")).status_code == 404


def test_worker_requeues_jobs_lost_from_redis(redis_broker: Broker) -> None:
    job = JobStore(redis_broker.sessions).create(tenant="alpha", request=small_request("lost"))
    worker.serve(redis_broker, burst=True)  # the job was never in Redis; the worker finds it in the DB
    assert JobStore(redis_broker.sessions).get(job["id"], tenant="alpha")["status"] == "succeeded"
