"""A job whose runner died (kill -9 of `broker worker`, or of `broker serve` running it in process)
is failed with a runner-stopped problem once its heartbeat is stale, never left `running` and
never run twice; a live runner keeps its job alive by beating."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from broker.app import Broker
from broker.db.service_models import JobRow
from broker.db.session import transaction
from broker.db.simulation_models import SimulationRow
from broker.jobs import store as job_store
from broker.jobs import worker
from broker.jobs.runner import fail_abandoned, run_job
from broker.jobs.simulations import SimulationService
from broker.jobs.store import HEARTBEAT_STALE, JobStore
from tests.integration.service_support import service_client, small_request
from tests.integration.test_simulations_api import small_fleet

pytestmark = pytest.mark.both_backends  # jobs on SQLite and PostgreSQL


def _abandon(broker: Broker, job_id: str) -> str:
    """Claim a job as a runner does, then let that runner die: `running`, its last heartbeat long ago."""
    assert JobStore(broker.sessions).claim(job_id) is not None
    long_ago = datetime.now(UTC) - HEARTBEAT_STALE - timedelta(seconds=5)
    with transaction(broker.sessions) as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(started_at=long_ago, heartbeat_at=long_ago))
    return job_id


def _left_running(broker: Broker) -> str:
    return _abandon(broker, str(JobStore(broker.sessions).create(tenant="default", request=small_request("x"))["id"]))


def _runner_stopped(job: dict[str, Any]) -> None:
    assert job["status"] == "failed" and job["finished_at"], job
    assert job["error"]["type"].endswith("/runner-stopped") and job["error"]["status"] == 503
    assert "stopped" in job["error"]["detail"] and job["attempts"] == 1 and job["result"] is None


def test_a_starting_worker_fails_a_job_whose_runner_died_and_does_not_run_it(broker: Broker) -> None:
    job_id = _left_running(broker)
    assert worker.serve(broker, burst=True) == 0  # nothing run again
    job = JobStore(broker.sessions).get(job_id, tenant="default")
    _runner_stopped(job)
    assert job["error"]["instance"] == "/v1/placements"
    assert broker.list_placements(tenant="default")[1] == 0


def test_a_starting_api_fails_a_job_its_dead_predecessor_left_running(broker: Broker) -> None:
    job_id = _left_running(broker)
    with service_client(broker) as c:
        deadline = time.monotonic() + 30
        while (job := c.get(f"/v1/jobs/{job_id}").json())["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        _runner_stopped(job)
        assert c.get("/v1/placements").json()["total"] == 0  # it was not run again


def test_the_simulation_of_an_abandoned_job_fails_with_it(broker: Broker) -> None:
    service = SimulationService(broker)
    sim, job_id = service.create(small_fleet(), tenant="default", days=0.25)
    _abandon(broker, job_id)
    with transaction(broker.sessions) as s:  # the runner had started the simulation too
        s.execute(update(SimulationRow).where(SimulationRow.id == sim["id"]).values(status="running"))
    assert fail_abandoned(broker.sessions) == [job_id]
    job = JobStore(broker.sessions).get(job_id, tenant="default")
    _runner_stopped(job)
    assert job["error"]["instance"] == "/v1/simulations"
    doc = service.get(sim["id"], tenant="default")
    assert doc["status"] == "failed" and doc["error"]["type"].endswith("/runner-stopped") and doc["finished_at"]
    assert fail_abandoned(broker.sessions) == []  # once


def test_a_running_job_with_a_fresh_heartbeat_is_left_alone(broker: Broker) -> None:
    store = JobStore(broker.sessions)
    job = store.create(tenant="default", request=small_request("busy"))
    assert store.claim(job["id"]) is not None
    long_ago = datetime.now(UTC) - timedelta(hours=2)  # a long solve: started long ago, beating now
    with transaction(broker.sessions) as s:
        s.execute(update(JobRow).where(JobRow.id == job["id"]).values(started_at=long_ago))
    assert fail_abandoned(broker.sessions) == []
    assert store.get(job["id"], tenant="default")["status"] == "running"
    assert store.pending_ids() == [] and store.claim(job["id"]) is None  # nor claimed a second time


def test_a_runner_beats_while_its_job_runs(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_store, "HEARTBEAT_EVERY_S", 0.05)
    beats: list[datetime] = []
    store = JobStore(broker.sessions)
    job = store.create(tenant="default", request=small_request("slow"))

    def slow_place(*_a: Any, **_k: Any) -> Any:
        for _ in range(10):
            time.sleep(0.05)
            with broker.sessions() as s:
                row = s.get(JobRow, job["id"])
                assert row is not None and row.heartbeat_at is not None
                beats.append(row.heartbeat_at)
        raise RuntimeError("the solve broke")

    monkeypatch.setattr(broker, "place", slow_place)
    assert run_job(broker, job["id"]) == "failed"
    assert len(set(beats)) >= 3, beats  # the heartbeat moved while the job ran
