"""`broker place --server` with a URL that is not the broker's root, or that answers as something
else than a broker: each is one message on stderr and a documented exit code, never an embedded
run, a traceback or a stranger's document on stdout. The servers are tiny local HTTP servers."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK, EXIT_UNREACHABLE
from broker.cli.main import app

RESULT = {"id": "pl_1", "status": "optimal", "cost_per_hour": 1.25, "nodes": [], "assignments": []}
runner = CliRunner()

#: (method, path) -> (status, content type, body)
Answer = Callable[[str, str], tuple[int, str, bytes]]


class Stub:
    """A local HTTP server answering every request with `answer(method, path)`; it records the paths."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.seen: list[tuple[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stub.seen.append((self.command, self.path.split("?")[0]))
                status, ctype, body = stub.answer(self.command, self.path.split("?")[0])
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"


@pytest.fixture()
def stub() -> Iterator[Callable[[Answer], Stub]]:
    started: list[Stub] = []

    def start(answer: Answer) -> Stub:
        s = Stub(answer)
        threading.Thread(target=s.http.serve_forever, daemon=True).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.http.shutdown()
        s.http.server_close()


@pytest.fixture()
def request_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("BROKER_API_KEY", raising=False)
    # an embedded run by mistake writes here, not into the user's database
    monkeypatch.setenv("BROKER_DATABASE_URL", f"sqlite:///{tmp_path / 'embedded.db'}")
    f = tmp_path / "req.yaml"
    f.write_text("name: web\nworkloads: [{name: a, replicas: 1, cpu: 1, memory_gib: 1}]\n")
    return f


def json_answer(status: int, doc: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(doc).encode()


def broker_at(prefix: str) -> Answer:
    """A broker whose API hangs off `prefix`: the placement on POST, an empty list on GET."""

    def answer(method: str, path: str) -> tuple[int, str, bytes]:
        if path == f"{prefix}/v1/placements":
            return json_answer(200, RESULT if method == "POST" else {"items": [], "total": 0})
        return json_answer(404, {"detail": "Not Found"})

    return answer


@pytest.mark.parametrize("server", ["", "  "])
def test_an_empty_server_is_invalid_not_an_embedded_run(request_file: Path, server: str) -> None:
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", server, "--format", "json"])
    assert r.exit_code == EXIT_INVALID, r.output
    assert "--server is empty" in r.stderr and r.stdout == ""


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_the_root_url_or_the_api_s_v1_url_both_reach_the_api(
    stub: Callable[[Answer], Stub], request_file: Path, suffix: str
) -> None:
    s = stub(broker_at(""))
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", s.url + suffix, "--format", "json"])
    assert r.exit_code == EXIT_OK, r.output
    assert json.loads(r.stdout) == RESULT
    assert ("POST", "/v1/placements") in s.seen


def test_a_proxy_s_path_prefix_is_kept(stub: Callable[[Answer], Stub], request_file: Path) -> None:
    s = stub(broker_at("/broker"))
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", s.url + "/broker", "--format", "json"])
    assert r.exit_code == EXIT_OK, r.output
    assert ("POST", "/broker/v1/placements") in s.seen


def test_a_url_with_no_placement_api_says_server_takes_the_root_url(
    stub: Callable[[Answer], Stub], request_file: Path
) -> None:
    s = stub(broker_at(""))
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", s.url + "/api"])
    assert r.exit_code == EXIT_INVALID, r.output
    assert "root URL" in r.stderr and f"{s.url}/api/v1/placements" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((200, "text/html; charset=utf-8", b"<html><body>It works!</body></html>"), "(text/html, HTTP 200)"),
        (json_answer(200, {"hello": 1}), "(application/json without a "),
        (json_answer(200, [1, 2]), "(application/json, HTTP 200)"),
        ((200, "application/json", b"{not json"), "(application/json, HTTP 200)"),
        ((400, "text/html", b"<h1>Bad Request</h1>"), "(text/html, HTTP 400)"),
        (json_answer(202, {"queued": True}), "without a job id"),
    ],
    ids=["html", "json-object", "json-list", "broken-json", "html-400", "202-without-job"],
)
@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_a_server_that_is_not_a_broker_is_one_line_and_exit_5(
    stub: Callable[[Answer], Stub], request_file: Path, answer: tuple[int, str, bytes], said: str, fmt: str
) -> None:
    s = stub(lambda method, path: answer)
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", s.url, "--format", fmt])
    assert r.exit_code == EXIT_UNREACHABLE, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)  # no traceback
    assert r.stdout == ""  # nothing of the stranger's answer
    assert "not a placement-broker answer" in r.stderr and said in r.stderr
    assert r.stderr.startswith(s.url)


def test_a_job_that_succeeds_without_a_placement_is_not_a_broker(
    stub: Callable[[Answer], Stub], request_file: Path
) -> None:
    def answer(method: str, path: str) -> tuple[int, str, bytes]:
        if method == "POST":
            return json_answer(202, {"id": "job_1", "status": "queued"})
        if path == "/v1/jobs/job_1":
            return json_answer(200, {"id": "job_1", "status": "succeeded", "result": {"hello": 1}})
        return json_answer(200, {"items": []})

    s = stub(answer)
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", s.url, "--format", "json"])
    assert r.exit_code == EXIT_UNREACHABLE, r.output
    assert "not a placement-broker answer" in r.stderr and r.stdout == ""


NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n"
    b"<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"
)


@pytest.mark.parametrize(
    "answer",
    [
        (502, "text/html", NGINX_502),
        (504, "text/html; charset=utf-8", b"<h1>504 Gateway Time-out</h1>"),
        json_answer(503, {"message": "no healthy upstream"}),  # a cloud gateway's own JSON
        (500, "text/plain", b"upstream crashed"),
    ],
    ids=["nginx-502", "html-504", "gateway-json-503", "plain-500"],
)
@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_a_proxy_s_5xx_page_is_one_line_naming_the_status_and_exit_5(
    stub: Callable[[Answer], Stub], request_file: Path, answer: tuple[int, str, bytes], fmt: str
) -> None:
    s = stub(lambda method, path: answer)
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", s.url, "--format", fmt])
    assert r.exit_code == EXIT_UNREACHABLE, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)  # no traceback
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"{s.url}/v1/placements: not a placement-broker answer")
    assert f"HTTP {answer[0]})" in r.stderr
    assert not any(page in r.stderr for page in ("<", "nginx", "healthy upstream", "crashed"))  # nothing of the page


def test_a_broker_s_own_server_error_is_exit_1_with_its_detail(
    stub: Callable[[Answer], Stub], request_file: Path
) -> None:
    problem = {
        "type": "https://placement-broker.dev/problems/internal",
        "title": "Internal error",
        "status": 500,
        "detail": "an unexpected error occurred; it has been logged",
        "instance": "/v1/placements",
    }
    s = stub(lambda method, path: (500, "application/problem+json", json.dumps(problem).encode()))
    r = runner.invoke(app, ["place", "-f", str(request_file), "--server", s.url, "--format", "json"])
    assert r.exit_code == EXIT_FAILED, r.output
    assert "server error 500" in r.stderr and "it has been logged" in r.stderr
    assert r.stdout == ""
