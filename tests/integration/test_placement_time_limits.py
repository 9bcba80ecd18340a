"""The time a placement gets over the API (docs/operations.md, "Time a placement gets"): its own
caps for synchronous answers and jobs, the default budget, and an answer that says its limit and
why the solver stopped, stored with the placement."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from broker.placements.store import PlacementStore

from .service_support import open_broker, service_client, small_request


def _job(c: TestClient, accepted: Any) -> dict[str, Any]:
    assert accepted.status_code == 202, accepted.text
    end = time.monotonic() + 60
    while time.monotonic() < end:
        job: dict[str, Any] = c.get(accepted.headers["location"]).json()
        if job["status"] in ("succeeded", "failed"):
            assert job["status"] == "succeeded", job
            return job
        time.sleep(0.05)
    raise AssertionError("the job did not finish")


def test_synchronous_answers_get_the_sync_cap_and_say_their_limit(db_url: str) -> None:
    broker = open_broker(db_url, sync_time_limit_s=60, async_time_limit_s=300)
    with service_client(broker) as c:
        # the old single cap (BROKER_SOLVE_TIME_LIMIT_S, 10 s) gave this request 10 s
        asked = c.post("/v1/placements", json=small_request("sync-45", time_limit_s=45))
        assert asked.status_code == 201, asked.text
        doc = asked.json()
        assert doc["time_limit_s"] == 45.0
        assert doc["stop_reason"] in ("optimal", "gap_target")
        assert not any("time limit capped" in w for w in doc["warnings"])
        # stored with the placement, read back the same
        stored = c.get(f"/v1/placements/{doc['id']}").json()
        assert (stored["time_limit_s"], stored["stop_reason"]) == (45.0, doc["stop_reason"])

        capped = c.post("/v1/placements", json=small_request("sync-90", time_limit_s=90, dry_run=True)).json()
        assert capped["time_limit_s"] == 60.0
        assert any("synchronous placements get at most 60 s" in w and '"async": true' in w for w in capped["warnings"])

        default = c.post("/v1/placements", json=small_request("sync-default", dry_run=True)).json()
        assert default["time_limit_s"] == 10.0  # the default budget of a one-workload request


def test_jobs_get_the_async_cap(db_url: str) -> None:
    broker = open_broker(db_url, sync_time_limit_s=30, async_time_limit_s=100)
    with service_client(broker) as c:
        # above the sync cap, within the async one: the job gets all it asked
        job = _job(c, c.post("/v1/placements", json=small_request("job-90", time_limit_s=90, **{"async": True})))
        assert job["result"]["time_limit_s"] == 90.0
        assert not any("time limit capped" in w for w in job["result"]["warnings"])
        assert job["result"]["stop_reason"] in ("optimal", "gap_target")
        capped = _job(c, c.post("/v1/placements", json=small_request("job-500", time_limit_s=500, **{"async": True})))
        assert capped["result"]["time_limit_s"] == 100.0
        assert any("asynchronous placements get at most 100 s" in w for w in capped["result"]["warnings"])


def test_a_reproducible_request_is_solved_on_work_limits_and_stored_so(db_url: str, monkeypatch: Any) -> None:
    import broker.app as app_module

    seen: list[Any] = []
    real = app_module.solve

    def recording(problem: Any, **kw: Any) -> Any:
        seen.append(kw["options"].work_limits)
        return real(problem, **kw)

    monkeypatch.setattr(app_module, "solve", recording)
    broker = open_broker(db_url)
    with service_client(broker) as c:
        first = c.post("/v1/placements", json=small_request("repro", reproducible=True))
        assert first.status_code == 201, first.text
        again = c.post("/v1/placements", json=small_request("repro", reproducible=True, dry_run=True)).json()
        plain = c.post("/v1/placements", json=small_request("clock", dry_run=True)).json()
        stored = PlacementStore(broker.sessions).get(first.json()["id"], tenant="default")
        bad = c.post("/v1/placements", json=small_request("bad", reproducible="sometimes"))
    assert seen[0] is not None and seen[1] is not None and seen[2] is None  # the clock's shares
    assert [a["pool"] for a in again["assignments"]] == [a["pool"] for a in first.json()["assignments"]]
    assert stored.request["reproducible"] is True  # a re-plan of it is reproducible too
    assert plain["cost_per_hour"] == again["cost_per_hour"]
    assert bad.status_code == 422
    assert ["body", "reproducible"] in [e["loc"] for e in bad.json()["errors"]]
