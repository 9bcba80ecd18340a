"""`POST /v1/simulations`: validated at once, run as a job, progress polled, results stored whole or not at all."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from broker.simulate.policies import POLICIES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def small_fleet() -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / "fleet.yaml").read_text())
    keep = doc["workloads"][::6][:8]
    names = {w["name"] for w in keep}
    for w in keep:
        w["depends_on"] = [d for d in w.get("depends_on", []) if d["workload"] in names]
    doc["workloads"] = keep
    doc["sites"] = ["aws:us-east-1", "aws:us-east-2", "gcp:us-east1"]
    doc["events"]["surge"]["workloads"] = [n for n in doc["events"]["surge"]["workloads"] if n in names]
    doc["policies"]["broker"]["forecast"] = "baseline"
    return doc


def wait(client: TestClient, sid: str, *, until: tuple[str, ...] = ("succeeded", "failed", "cancelled")) -> dict:
    deadline = time.monotonic() + 180
    seen = []
    while time.monotonic() < deadline:
        doc = client.get(f"/v1/simulations/{sid}").json()
        seen.append(doc["progress"])
        if doc["status"] in until:
            doc["_seen"] = seen
            return doc
        time.sleep(0.2)
    raise AssertionError(f"simulation {sid} did not finish: {doc}")


def wait_job(client: TestClient, job_id: str) -> dict:
    """The job row is finished just after the simulation's own row."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


def test_simulation_runs_and_is_stored(client: TestClient) -> None:
    r = client.post(
        "/v1/simulations", json={"fleet": small_fleet(), "days": 0.25, "policies": ["kube-default", "broker"]}
    )
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    assert r.headers["location"] == f"/v1/simulations/{sid}"
    assert r.json()["status"] in ("queued", "running") and r.json()["job_id"]
    doc = wait(client, sid)
    assert doc["status"] == "succeeded", doc["error"]
    assert doc["progress"] == 1.0
    assert [row["policy"] for row in doc["summary"]] == ["kube-default", "broker"]
    assert all(row["spend_usd"] > 0 for row in doc["summary"])
    assert len(doc["series"]["broker"]["spend_per_hour"]) == 72
    assert {e["kind"] for e in doc["events"]} <= {"price_change", "outage_start", "outage_end", "surge_start",
                                                  "surge_end", "spot_interruption"}  # fmt: skip
    listed = client.get("/v1/simulations").json()
    assert listed["total"] >= 1 and listed["items"][0]["id"] == sid and listed["items"][0]["summary"] is None
    job = wait_job(client, r.json()["job_id"])
    assert job["status"] == "succeeded" and job["result"]["simulation_id"] == sid


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        (lambda b: b["fleet"]["workloads"][0].update(memory_gib=-1), ["body", "fleet", "workloads", 0, "memory_gib"]),
        (
            lambda b: b["fleet"]["workloads"][1]["usage"].update(series="zz"),
            ["body", "fleet", "workloads", 1, "usage", "series"],
        ),
        (lambda b: b["fleet"].update(sites=["aws:nowhere-1"]), ["body", "fleet", "sites", 0]),
        (lambda b: b.update(policies=["kube-default", "best"]), ["body", "policies", 1]),
        (lambda b: b.update(days=10), ["body", "days"]),
        (lambda b: b["fleet"].update(days=10), ["body", "fleet", "days"]),
        (lambda b: b["fleet"].update(traces="mine.csv"), ["body", "fleet", "traces"]),
    ],
)
def test_bad_input_is_a_problem_naming_the_field(client: TestClient, change, loc) -> None:
    body = {"fleet": small_fleet(), "policies": ["kube-default"]}
    change(body)
    r = client.post("/v1/simulations", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    locs = [e["loc"] for e in r.json().get("errors", [])]
    assert loc in locs, r.json()
    assert client.get("/v1/simulations").json()["total"] == 0  # nothing stored


def test_failed_simulation_stores_no_results(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        name = "broken"

        def __init__(self, fleet, market):
            self.calls = 0

        def start(self, ctx):
            pass

        def decide(self, cluster, view):
            self.calls += 1
            if self.calls > 20:
                raise RuntimeError("policy bug")

    monkeypatch.setitem(POLICIES, "broken", Broken)
    r = client.post(
        "/v1/simulations", json={"fleet": small_fleet(), "days": 0.25, "policies": ["kube-default", "broken"]}
    )
    doc = wait(client, r.json()["id"])
    assert doc["status"] == "failed" and doc["error"]["type"] == "internal"
    assert doc["summary"] is None and doc["series"] is None and doc["events"] is None
    job = wait_job(client, r.json()["job_id"])
    assert job["status"] == "failed" and "failed" in job["error"]["detail"]


def test_cancelled_simulation_stores_no_results(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    class Slow:
        name = "slow"

        def __init__(self, fleet, market):
            pass

        def start(self, ctx):
            pass

        def decide(self, cluster, view):
            time.sleep(0.01)

    monkeypatch.setitem(POLICIES, "slow", Slow)
    r = client.post("/v1/simulations", json={"fleet": small_fleet(), "days": 1, "policies": ["slow"]})
    sid = r.json()["id"]
    wait(client, sid, until=("running",))
    c = client.post(f"/v1/simulations/{sid}/cancel")
    assert c.status_code == 200 and c.json()["cancel_requested"] is (c.json()["status"] == "running")
    doc = wait(client, sid)
    assert doc["status"] == "cancelled"
    assert doc["summary"] is None and doc["series"] is None
    assert client.post(f"/v1/simulations/{sid}/cancel").status_code == 409


def test_a_pending_cancel_shows_until_the_run_stops(client: TestClient, broker) -> None:
    from sqlalchemy import update

    from broker.db.session import transaction
    from broker.db.simulation_models import SimulationRow
    from broker.jobs.simulations import SimulationService

    # a run in a long step: its runner has not reached its next progress write
    sim, _job = SimulationService(broker).create(small_fleet(), tenant="default", days=0.25)
    with transaction(broker.sessions) as s:
        s.execute(update(SimulationRow).where(SimulationRow.id == sim["id"]).values(status="running"))
    assert client.get(f"/v1/simulations/{sim['id']}").json()["cancel_requested"] is False
    c = client.post(f"/v1/simulations/{sim['id']}/cancel")
    assert c.status_code == 200 and c.json()["status"] == "running" and c.json()["cancel_requested"] is True
    assert client.get(f"/v1/simulations/{sim['id']}").json()["cancel_requested"] is True
    listed = client.get("/v1/simulations").json()["items"]
    assert [i["cancel_requested"] for i in listed if i["id"] == sim["id"]] == [True]
    SimulationService(broker)._end(sim["id"], "cancelled", error={"type": "cancelled"})  # the run stops
    done = client.get(f"/v1/simulations/{sim['id']}").json()
    assert done["status"] == "cancelled" and done["cancel_requested"] is False


def test_unknown_simulation_is_404(client: TestClient) -> None:
    assert client.get("/v1/simulations/sim_nope").status_code == 404


def test_a_sweep_queues_one_job_per_scenario_and_seed(client: TestClient) -> None:
    import sys

    sys.path.insert(0, str(EXAMPLES.parent / "bench"))
    from simulate_sweep import sweep

    rows = sweep(
        client,
        small_fleet(),
        scenarios=["base", "home:events.site_outage.site=aws:us-east-1"],
        seeds=[1, 2],
        policies=["kube-default", "karpenter-like"],
        days=0.25,
        poll_s=0.2,
        timeout_s=300,
    )
    assert sorted({(name, seed) for name, seed, _ in rows}) == [("base", 1), ("base", 2), ("home", 1), ("home", 2)]
    assert len(rows) == 8
    assert client.get("/v1/jobs").json()["total"] >= 4
