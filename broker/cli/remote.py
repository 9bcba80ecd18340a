"""`broker place --server`: the placement API as a client sees it, including async jobs.

A server answers 202 with a job when the request asks for one (`"async": true`) or is large
(more than BROKER_MAX_WORKLOADS_SYNC workloads); the command then polls `GET /v1/jobs/{id}`
until the job has finished or `--timeout` has passed. A failed job carries the problem document
the same request gets synchronously, so both paths end in one mapping to exit codes
(`raise_for_problem`). Progress goes to stderr: stdout carries only the placement document.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import typer
from rich.console import Console
from rich.markup import escape

from broker.cli.exit_codes import EXIT_FAILED
from broker.errors import Infeasible, InvalidRequest, OverBudget

err = Console(stderr=True)

#: The wait between two polls of a job: short at first (a small async request is done in a few
#: seconds), then every POLL_MAX_S (one cheap GET; a long solve takes minutes).
POLL_FIRST_S = 0.25
POLL_MAX_S = 2.0
#: How long one HTTP call may take; a poll that gets no answer is retried until --timeout.
REQUEST_TIMEOUT_S = 30.0
#: The server's default BROKER_JOB_TIMEOUT_S: a job's solve is capped well below it (300 s).
DEFAULT_JOB_TIMEOUT_S = 900.0


class InvalidServer(ValueError):
    """A --server that names no broker's root URL (main.place: exit 2)."""


class NotABroker(Exception):
    """An answer the placement API never gives: --server names something else (main.place: exit 5)."""


def root_url(server: str) -> str:
    """The broker's root URL from --server: an empty one is an error, not an embedded run (CI's
    `--server "$BROKER_URL"` with the variable unset), and the API's own `/v1` at its end is
    dropped, the routes being `/v1/...` under the root. Any other path is kept: a proxy's prefix."""
    url = server.strip().rstrip("/")
    if not url:
        raise InvalidServer(
            "--server is empty (is the variable meant to hold the URL unset?): give the broker's root URL, "
            "e.g. http://broker:8080, or leave --server out to place embedded"
        )
    return url.removesuffix("/v1")


def auth(key: str) -> dict[str, str]:
    """`Authorization: Bearer $BROKER_API_KEY` for a server that requires keys."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def client(server: str, headers: dict[str, str]) -> httpx.Client:
    """The HTTP client of one command run (tests hand in a transport by replacing this)."""
    return httpx.Client(base_url=server, headers=headers, timeout=REQUEST_TIMEOUT_S)


def _body(r: httpx.Response) -> dict[str, Any]:
    if r.headers.get("content-type", "").split(";")[0].strip().endswith("json"):
        try:
            doc = r.json()
        except ValueError:
            return {"detail": r.text}
        return dict(doc) if isinstance(doc, dict) else {"detail": r.text}
    return {"detail": r.text}


def _content_type(r: httpx.Response) -> str:
    return r.headers.get("content-type", "").split(";")[0].strip() or "no content type"


def _not_a_broker(r: httpx.Response, what: str) -> NotABroker:
    return NotABroker(f"{r.request.url}: not a placement-broker answer ({what}, HTTP {r.status_code})")


def _server_error(r: httpx.Response) -> dict[str, Any]:
    """A 5xx's problem document. The broker's server errors are problem+json with a detail; anything
    else (nginx's HTML `502 Bad Gateway`, a gateway's own JSON) is something in front of the broker
    answering for it: not a broker answer (main.place: exit 5), and its page is never printed."""
    try:
        doc = r.json() if _content_type(r).endswith("json") else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("detail"), str):
        raise NotABroker(
            f"{r.request.url}: not a placement-broker answer ({_content_type(r)}, HTTP {r.status_code}): "
            f"{r.status_code} {r.reason_phrase or 'server error'} from something in front of the broker "
            "(a proxy or gateway); is the broker behind it running?"
        )
    return doc


def _json_object(r: httpx.Response) -> dict[str, Any]:
    """An answer's JSON object: the placement API answers nothing else (problems are problem+json),
    so an HTML page or a bare value means --server names something else."""
    try:
        doc = r.json() if _content_type(r).endswith("json") else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise _not_a_broker(r, _content_type(r))
    return doc


def _placement(r: httpx.Response, doc: Any) -> dict[str, Any]:
    """`doc` if it is a placement document (what the gates and renderings read is there)."""
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("cost_per_hour"), int | float)
        or not isinstance(doc.get("assignments"), list)
    ):
        raise _not_a_broker(r, f"{_content_type(r)} without a placement's cost_per_hour and assignments")
    return doc


def raise_for_problem(status: int, body: dict[str, Any]) -> None:
    """A problem document as the error it stands for (main.place maps those to exit codes), or
    exit 1 for a server error; the same for a synchronous answer and for a failed job."""
    if status == 422 and str(body.get("type", "")).endswith("/over-budget"):
        raise OverBudget(str(body.get("detail", "over budget")), budget=body.get("budget"))
    if status == 422 and "conflicts" in body:
        raise Infeasible(str(body.get("detail", "infeasible")), conflicts=list(body["conflicts"]))
    if 400 <= status < 500:
        raise InvalidRequest(str(body.get("detail", "invalid request")), errors=list(body.get("errors") or []))
    err.print(f"[red]server error {status}:[/red] {escape(str(body.get('detail')))}", soft_wrap=True)
    raise typer.Exit(EXIT_FAILED)


def previous(http: httpx.Client, name: str) -> dict[str, Any] | None:
    """The newest stored placement of that name (for --max-increase-pct), if any."""
    r = http.get("/v1/placements", params={"name": name, "limit": 1})
    items = _json_object(r).get("items") if r.status_code == 200 else []
    if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
        raise _not_a_broker(r, f"{_content_type(r)} without a list of placements")
    if not items:
        return None
    got = http.get(f"/v1/placements/{items[0]['id']}")
    return _placement(got, _json_object(got)) if got.status_code == 200 else None


def place(http: httpx.Client, doc: Any, *, timeout_s: float) -> dict[str, Any]:
    """The placement document the server answers, waiting for it when it queues a job."""
    r = http.post("/v1/placements", json=doc, timeout=300)
    if r.status_code in (200, 201):
        return _placement(r, _json_object(r))
    if r.status_code == 202:
        job = _json_object(r)
        if not job.get("id"):
            raise _not_a_broker(r, f"{_content_type(r)} without a job id")
        return wait_for_job(http, str(job["id"]), timeout_s=timeout_s)
    body = _body(r)
    if r.status_code == 404 and (body.get("detail") == "Not Found" or "json" not in _content_type(r)):
        # no such route (the framework's 404, or a web server's page): the URL is not the broker's root
        raise InvalidServer(
            f"{r.request.url} is not found (404): --server takes the broker's root URL, the one its "
            "/v1/... routes hang off (e.g. http://broker:8080)"
        )
    if r.status_code >= 500:  # the broker's server error (exit 1), or a proxy's error page (exit 5)
        raise_for_problem(r.status_code, _server_error(r))
    _json_object(r)  # the broker's problems are JSON
    raise_for_problem(r.status_code, body)
    raise AssertionError("unreachable")  # raise_for_problem always raises


def _retry_after(r: httpx.Response) -> float | None:
    try:
        return max(0.0, float(r.headers["Retry-After"]))
    except (KeyError, ValueError):
        return None


def wait_for_job(http: httpx.Client, job_id: str, *, timeout_s: float) -> dict[str, Any]:
    """Poll the job until it has finished: its placement document, or its problem as an error.

    Not finished within `timeout_s`: exit 1 naming the job (it keeps running on the server). A
    poll that gets no answer or a 429/502/503/504 is retried; no answer up to the deadline is
    the transport error (exit 5, main.place)."""
    start = time.monotonic()
    deadline = start + timeout_s
    interval = POLL_FIRST_S
    state = "queued"
    last_error: httpx.TransportError | None = None
    err.print(f"queued as job {escape(job_id)} (GET /v1/jobs/{escape(job_id)}); waiting up to {timeout_s:g} s")
    try:
        with err.status(f"job {escape(job_id)}: {state}") as status:
            while True:
                wait: float | None = None
                try:
                    r = http.get(f"/v1/jobs/{job_id}")
                    last_error = None
                except httpx.TransportError as exc:
                    last_error = exc
                else:
                    if r.status_code == 200:
                        job = _json_object(r)
                        if job.get("status") != state:
                            state = str(job.get("status"))
                            err.print(f"job {escape(job_id)}: {escape(state)} after {time.monotonic() - start:.1f} s")
                        if state == "succeeded" and isinstance(job.get("result"), dict):
                            return _placement(r, job["result"])
                        if state == "succeeded":  # a server that lost the document: say so, not a KeyError
                            raise_for_problem(500, {"detail": f"job {job_id} succeeded without a placement document"})
                        if state == "failed":
                            problem = dict(job.get("error") or {})
                            raise_for_problem(int(problem.get("status") or 500), problem)
                    elif r.status_code in (429, 502, 503, 504):
                        wait = _retry_after(r)
                    else:  # gone (404), or a key that may no longer read it: nothing to wait for
                        problem = _body(r)
                        err.print(
                            f"[red]cannot read job {escape(job_id)}:[/red] {r.status_code} "
                            f"{escape(str(problem.get('detail', '')))}",
                            soft_wrap=True,
                        )
                        raise typer.Exit(EXIT_FAILED)
                now = time.monotonic()
                if now >= deadline:
                    break
                status.update(f"job {escape(job_id)}: {escape(state)} · {now - start:.0f} s of {timeout_s:g} s")
                time.sleep(min(wait if wait is not None else interval, deadline - now))
                interval = min(interval * 2, POLL_MAX_S)
    except KeyboardInterrupt:
        err.print(f"stopped waiting; job {escape(job_id)} goes on on the server (GET /v1/jobs/{escape(job_id)})")
        raise
    if last_error is not None:
        raise last_error
    err.print(
        f"[red]job {escape(job_id)} has not finished within --timeout {timeout_s:g} s[/red] (still {escape(state)}; "
        f"it goes on on the server: GET /v1/jobs/{escape(job_id)})",
        soft_wrap=True,
    )
    raise typer.Exit(EXIT_FAILED)
