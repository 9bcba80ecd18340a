"""`broker place --server` when the server queues the request as a job (202): it polls the job,
prints progress on stderr only, honours --timeout and maps a failed job like a synchronous answer.

The server is an httpx MockTransport here, so every answer a server may give (a job that never
finishes, a lost connection, a 503) can be staged; tests/integration/test_cli_jobs.py runs the
same command against the real app."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from broker.cli import remote
from broker.cli.exit_codes import EXIT_FAILED, EXIT_INFEASIBLE, EXIT_INVALID, EXIT_OK, EXIT_OVER_LIMIT, EXIT_UNREACHABLE
from broker.cli.main import app

SERVER = "http://broker.test"
RESULT = {"id": "pl_1", "status": "optimal", "cost_per_hour": 1.25, "nodes": [], "assignments": []}
runner = CliRunner()

Handler = Callable[[httpx.Request], httpx.Response]


def job(status: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "job_1",
        "kind": "placement",
        "status": status,
        "created_at": "2026-12-04T20:00:00+00:00",
        "started_at": None,
        "finished_at": None,
        "attempts": 0,
        "placement_id": None,
        "result": None,
        "error": None,
        **extra,
    }


class FakeServer:
    """Answers POST /v1/placements with 202 and each GET /v1/jobs/job_1 with the next staged answer
    (the last one repeats)."""

    def __init__(self, *polls: httpx.Response | Exception) -> None:
        self.polls = list(polls)
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if request.method == "GET" and request.url.path == "/v1/placements":
            return httpx.Response(200, json={"items": [], "total": 0, "limit": 1, "offset": 0})
        if request.method == "POST" and request.url.path == "/v1/placements":
            return httpx.Response(202, json=job("queued"), headers={"Location": "/v1/jobs/job_1"})
        assert request.method == "GET" and request.url.path == "/v1/jobs/job_1", request.url
        answer = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def polled(self) -> int:
        return sum(r.url.path.startswith("/v1/jobs/") for r in self.seen)


def ok(doc: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=doc)


@pytest.fixture()
def request_file(tmp_path: Path) -> Path:
    f = tmp_path / "req.yaml"
    f.write_text("name: big\nasync: true\nworkloads: [{name: a, replicas: 1, cpu: 1, memory_gib: 1}]\n")
    return f


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(remote, "POLL_FIRST_S", 0.01)
    monkeypatch.setattr(remote, "POLL_MAX_S", 0.02)
    monkeypatch.delenv("BROKER_API_KEY", raising=False)
    yield


def serve(monkeypatch: pytest.MonkeyPatch, handler: Handler) -> None:
    def client(server: str, headers: dict[str, str]) -> httpx.Client:
        return httpx.Client(base_url=server, headers=headers, transport=httpx.MockTransport(handler))

    monkeypatch.setattr(remote, "client", client)


def place(request_file: Path, *args: str) -> Any:
    return runner.invoke(app, ["place", "-f", str(request_file), "--server", SERVER, *args])


def test_a_queued_request_is_polled_until_its_placement_is_there(
    monkeypatch: pytest.MonkeyPatch, request_file: Path
) -> None:
    server = FakeServer(ok(job("queued")), ok(job("running")), ok(job("running")), ok(job("succeeded", result=RESULT)))
    serve(monkeypatch, server)
    r = place(request_file, "--format", "json")
    assert r.exit_code == EXIT_OK, r.output
    assert json.loads(r.stdout) == RESULT  # stdout: the placement document and nothing else
    assert "job_1" in r.stderr and "running" in r.stderr and "succeeded" in r.stderr
    assert server.polled == 4


@pytest.mark.parametrize(
    ("problem", "code", "said"),
    [
        (
            {"type": "https://broker.example/problems/infeasible", "status": 422, "detail": "no site fits",
             "conflicts": ["residency:gdpr-eu on a", "latency_slo_ms:us<=5 on a"]},
            EXIT_INFEASIBLE,
            "residency:gdpr-eu on a",
        ),
        (
            {"type": "https://broker.example/problems/over-budget", "status": 422, "detail": "over the budget by 3 USD",
             "budget": {"monthly_usd": 1}},
            EXIT_OVER_LIMIT,
            "over the budget by 3 USD",
        ),
        (
            {"type": "https://broker.example/problems/invalid-request", "status": 422, "detail": "unknown site",
             "errors": [{"loc": ["user_regions", 0, "site"], "msg": "no site aws:nowhere"}]},
            EXIT_INVALID,
            "no site aws:nowhere",
        ),
        (
            {"type": "https://broker.example/problems/internal", "status": 500, "detail": "logged"},
            EXIT_FAILED,
            "server error 500",
        ),
    ],
    ids=["infeasible", "over-budget", "invalid", "internal"],
)  # fmt: skip
def test_a_failed_job_exits_as_the_same_synchronous_answer_would(
    monkeypatch: pytest.MonkeyPatch, request_file: Path, problem: dict[str, Any], code: int, said: str
) -> None:
    serve(monkeypatch, FakeServer(ok(job("running")), ok(job("failed", error=problem))))
    r = place(request_file)
    assert r.exit_code == code, r.output
    assert said in r.stderr and "Traceback" not in r.output
    assert r.stdout == ""


def test_an_infeasible_job_in_json_prints_the_infeasible_document(
    monkeypatch: pytest.MonkeyPatch, request_file: Path
) -> None:
    problem = {"type": "x/infeasible", "status": 422, "detail": "no site fits", "conflicts": ["residency:us-only on a"]}
    serve(monkeypatch, FakeServer(ok(job("failed", error=problem))))
    r = place(request_file, "--format", "json")
    assert r.exit_code == EXIT_INFEASIBLE
    assert json.loads(r.stdout) == {"status": "infeasible", "detail": "no site fits", "conflicts": problem["conflicts"]}


def test_a_job_that_does_not_finish_within_the_timeout_exits_1_naming_it(
    monkeypatch: pytest.MonkeyPatch, request_file: Path
) -> None:
    server = FakeServer(ok(job("running")))
    serve(monkeypatch, server)
    t0 = time.monotonic()
    r = place(request_file, "--timeout", "0.3", "--format", "json")
    took = time.monotonic() - t0
    assert r.exit_code == EXIT_FAILED, r.output
    assert r.stdout == ""
    assert "job_1" in r.stderr and "--timeout 0.3" in r.stderr and "/v1/jobs/job_1" in r.stderr
    assert 0.3 <= took < 10 and server.polled >= 3  # it polled until the deadline, then stopped


def test_polls_ride_out_a_lost_connection_and_a_busy_server(
    monkeypatch: pytest.MonkeyPatch, request_file: Path
) -> None:
    server = FakeServer(
        httpx.ConnectError("connection refused"),
        httpx.Response(503, json={"detail": "restarting"}, headers={"Retry-After": "0"}),
        ok(job("running")),
        ok(job("succeeded", result=RESULT)),
    )
    serve(monkeypatch, server)
    r = place(request_file, "--format", "json")
    assert r.exit_code == EXIT_OK, r.output
    assert json.loads(r.stdout) == RESULT and server.polled == 4


def test_a_server_gone_for_the_whole_wait_is_unreachable(monkeypatch: pytest.MonkeyPatch, request_file: Path) -> None:
    serve(monkeypatch, FakeServer(httpx.ConnectError("connection refused")))
    r = place(request_file, "--timeout", "0.2")
    assert r.exit_code == EXIT_UNREACHABLE, r.output
    assert f"cannot reach {SERVER}" in r.stderr and "Traceback" not in r.output


def test_a_job_that_is_gone_exits_1(monkeypatch: pytest.MonkeyPatch, request_file: Path) -> None:
    serve(monkeypatch, FakeServer(httpx.Response(404, json={"status": 404, "detail": "no job job_1"})))
    r = place(request_file)
    assert r.exit_code == EXIT_FAILED, r.output
    assert "no job job_1" in r.stderr


def test_the_cost_limits_apply_to_a_jobs_placement(monkeypatch: pytest.MonkeyPatch, request_file: Path) -> None:
    serve(monkeypatch, FakeServer(ok(job("succeeded", result=RESULT))))
    r = place(request_file, "--format", "json", "--max-cost-per-hour", "1")
    assert r.exit_code == EXIT_OVER_LIMIT and json.loads(r.stdout) == RESULT
    assert "over limit" in r.stderr


def test_the_polls_carry_the_api_key(monkeypatch: pytest.MonkeyPatch, request_file: Path) -> None:
    monkeypatch.setenv("BROKER_API_KEY", "k-123")
    server = FakeServer(ok(job("succeeded", result=RESULT)))
    serve(monkeypatch, server)
    assert place(request_file, "--format", "json").exit_code == EXIT_OK
    assert server.seen and all(r.headers.get("Authorization") == "Bearer k-123" for r in server.seen)
