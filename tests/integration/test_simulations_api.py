"""`POST /v1/simulations`: validated at once, run as a job, progress polled, results stored whole or not at all."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from broker.errors import InvalidRequest
from broker.jobs.simulations import SimulationService
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
        # what only constructing a policy finds: the CLI refuses it, so POST does (not a failed job)
        (
            lambda b: b["fleet"]["policies"]["kube-default"].update(instance_type="t3.nano"),
            ["body", "fleet", "policies", "kube-default", "instance_type"],
        ),
        # a run replays one 5-minute step at least
        (lambda b: b.update(days=0.001), ["body", "days"]),
        (lambda b: b["fleet"].update(days=0.001), ["body", "fleet", "days"]),
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


def test_every_offending_field_is_named_in_one_answer(client: TestClient) -> None:
    body = {"fleet": small_fleet(), "policies": ["kube-default", "best"]}
    body["fleet"]["workloads"][0]["cpu"] = "2"
    body["fleet"]["policies"]["kube-default"]["instance_type"] = "t3.nano"
    r = client.post("/v1/simulations", json=body)
    assert r.status_code == 422, r.text
    locs = [e["loc"] for e in r.json()["errors"]]
    assert ["body", "policies", 1] in locs and ["body", "fleet", "workloads", 0, "cpu"] in locs, locs
    # the fleet's other checks need a fleet that parses: the same body with cpu 2 names the instance type
    body["fleet"]["workloads"][0]["cpu"] = 2
    locs = [e["loc"] for e in client.post("/v1/simulations", json=body).json()["errors"]]
    assert ["body", "policies", 1] in locs and ["body", "fleet", "policies", "kube-default", "instance_type"] in locs


def test_less_than_one_step_is_refused_saying_so(client: TestClient) -> None:
    r = client.post("/v1/simulations", json={"fleet": small_fleet(), "days": 0.001})
    assert r.status_code == 422, r.text
    (error,) = [e for e in r.json()["errors"] if e["loc"] == ["body", "days"]]
    assert "one 5-minute step" in error["msg"], error


def test_a_run_whose_broker_solves_ran_out_of_time_says_so(client: TestClient) -> None:
    fleet = small_fleet()
    fleet["policies"]["broker"]["time_limit_s"] = 0.001  # every solve meets the clock before its work limits
    r = client.post("/v1/simulations", json={"fleet": fleet, "days": 0.05, "policies": ["kube-default", "broker"]})
    assert r.status_code == 202, r.text
    doc = wait(client, r.json()["id"])
    assert doc["status"] == "succeeded", doc["error"]
    (warning,) = doc["warnings"]
    assert warning.startswith("broker policy: a solve at 0 s ran into time_limit_s (0.001 s)"), warning
    assert "depend on the machine's speed" in warning
    assert client.get("/v1/simulations").json()["items"][0]["warnings"] == [warning]
    # a run that met no limit says so with an empty list
    r = client.post("/v1/simulations", json={"fleet": small_fleet(), "days": 0.05, "policies": ["kube-default"]})
    assert wait(client, r.json()["id"])["warnings"] == []


def test_a_failed_run_stores_a_problem_document(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a failed async placement's `error`: the document POST would have answered with."""

    class Refusing:
        name = "refusing"

        def __init__(self, fleet, market):
            pass

        def start(self, ctx):
            raise InvalidRequest("refused at run time", errors=[{"loc": ["policies", "refusing"], "msg": "no"}])

        def decide(self, cluster, view):
            pass

    monkeypatch.setitem(POLICIES, "refusing", Refusing)
    r = client.post("/v1/simulations", json={"fleet": small_fleet(), "days": 0.05, "policies": ["refusing"]})
    doc = wait(client, r.json()["id"])
    assert doc["status"] == "failed"
    assert doc["error"] == {
        "type": "https://placement-broker.dev/problems/invalid-request",
        "title": "Invalid request",
        "status": 422,
        "detail": "refused at run time",
        "instance": "/v1/simulations",
        "errors": [{"loc": ["policies", "refusing"], "msg": "no", "type": "value_error"}],
    }


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
    assert doc["status"] == "failed"
    assert doc["error"] == {
        "type": "https://placement-broker.dev/problems/internal",
        "title": "Internal error",
        "status": 500,
        "detail": "an unexpected error occurred; it has been logged",
        "instance": "/v1/simulations",
    }
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


def test_without_a_key_every_tenants_runs_are_read_as_on_the_dashboard(client: TestClient) -> None:
    """Authentication off: the local user sees every tenant's runs (as /v1/dashboard), `?tenant=` picks one."""
    service = SimulationService(client.app.state.broker)  # type: ignore[attr-defined]
    theirs, _ = service.create(small_fleet(), tenant="acme", policies=["kube-default"], days=0.05)
    mine = client.post("/v1/simulations", json={"fleet": small_fleet(), "days": 0.05, "policies": ["kube-default"]})
    assert mine.json()["tenant"] == "default"
    listed = client.get("/v1/simulations").json()
    assert [(x["id"], x["tenant"]) for x in listed["items"]] == [(mine.json()["id"], "default"), (theirs["id"], "acme")]
    assert listed["tenants"] == ["acme", "default"] and listed["total"] == 2
    only = client.get("/v1/simulations", params={"tenant": "acme"}).json()
    assert [x["id"] for x in only["items"]] == [theirs["id"]] and only["tenants"] == ["acme", "default"]
    assert client.get(f"/v1/simulations/{theirs['id']}").json()["tenant"] == "acme"
    assert client.post(f"/v1/simulations/{theirs['id']}/cancel").json()["status"] == "cancelled"
