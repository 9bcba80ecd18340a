"""/metrics as Prometheus reads it: every request labelled by its route template, help texts
that say what the counters count."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.service_support import open_broker, service_client, small_request


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _routes(text: str) -> dict[tuple[str, str], set[str]]:
    """(method, route) -> statuses seen, from the request-duration histogram's count samples."""
    fam = _families(text)["broker_http_request_duration_seconds"]
    out: dict[tuple[str, str], set[str]] = {}
    for s in fam.samples:  # type: ignore[attr-defined]
        if s.name.endswith("_count"):
            out.setdefault((s.labels["method"], s.labels["route"]), set()).add(s.labels["status"])
    return out


def test_framework_routes_and_early_answers_carry_their_route_template(db_url: str) -> None:
    with service_client(open_broker(db_url, max_body_bytes=2000)) as c:
        paths = ("/openapi.json", "/docs", "/docs/static/swagger-ui.css", "/metrics", "/v1/placements/pl_nothing")
        for path in (*paths, "/no/such/path"):
            c.get(path)
        big = json.dumps(small_request() | {"pad": "y" * 3000}).encode()
        assert c.post("/v1/placements", content=big, headers={"content-type": "application/json"}).status_code == 413
        assert c.delete("/v1/sites").status_code == 405
        routes = _routes(c.get("/metrics").text)
    assert "200" in routes[("GET", "/openapi.json")]
    assert "200" in routes[("GET", "/docs")]
    assert "200" in routes[("GET", "/docs/static")]  # a Mount: its own path, though it rewrites the scope
    assert "200" in routes[("GET", "/metrics")]
    assert "404" in routes[("GET", "/v1/placements/{placement_id}")]  # the template, not the id
    assert "413" in routes[("POST", "/v1/placements")]  # refused before routing, still its route
    assert "405" in routes[("DELETE", "/v1/sites")]
    # only a path no route serves is unmatched
    assert {r for (_m, r) in routes if r == "unmatched"} == {"unmatched"}
    assert routes[("GET", "unmatched")] == {"404"}


def test_counters_say_they_count_this_server_since_it_started(db_url: str) -> None:
    with service_client(open_broker(db_url)) as c:
        assert c.post("/v1/placements", json=small_request()).status_code == 201
        fams = _families(c.get("/metrics").text)
    for name in ("broker_savings_usd_per_hour", "broker_placed_cost_usd_per_hour", "broker_placements"):
        doc = fams[name].documentation  # type: ignore[attr-defined]
        assert "since it started" in doc, (name, doc)
        assert "Sum over stored placements" not in doc
    placed = fams["broker_placed_cost_usd_per_hour"].samples  # type: ignore[attr-defined]
    assert any(s.name.endswith("_total") and s.value > 0 for s in placed)


def test_jobs_a_worker_ran_elsewhere_are_counted_from_the_database(db_url: str) -> None:
    """A job run by `broker worker` (another process, maybe another machine: it serves no metrics)
    shows on the API's /metrics, read from the jobs table at scrape time, by kind and status."""
    from datetime import UTC, datetime

    from broker.db.service_models import JobRow
    from broker.db.session import transaction

    broker = open_broker(db_url)
    now = datetime.now(UTC)
    rows = [("placement", "succeeded"), ("placement", "succeeded"), ("placement", "failed"), ("simulation", "running")]
    with transaction(broker.sessions) as s:  # as the worker's process writes them
        for i, (kind, status) in enumerate(rows):
            s.add(
                JobRow(
                    id=f"job_m{i}", tenant="acme", kind=kind, status=status, request={}, created_at=now, started_at=now
                )
            )
    with service_client(broker) as c:
        text = c.get("/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith("broker_job")
    }
    assert samples[("broker_jobs_total", (("kind", "placement"), ("status", "succeeded")))] == 2
    assert samples[("broker_jobs_total", (("kind", "placement"), ("status", "failed")))] == 1
    assert samples[("broker_jobs_unfinished", (("kind", "simulation"), ("status", "running")))] == 1
    assert ("broker_job_queue_depth", ()) in samples
    assert text.count("# TYPE broker_jobs_total") + text.count("# TYPE broker_jobs counter") == 1


def test_broker_serve_starts_its_counters_at_zero(env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PROMETHEUS_MULTIPROC_DIR reused across a restart: the previous run's sample files go before the
    server's processes start (a counter kept its old value), the starting process's own stay."""
    import uvicorn
    from typer.testing import CliRunner

    from broker.cli.main import app

    prom = tmp_path / "prom"
    prom.mkdir()
    stale = [prom / "counter_4194301.db", prom / "histogram_4194302.db", prom / "gauge_livesum_4194303.db"]
    own = prom / f"counter_{os.getpid()}.db"
    for f in (*stale, own):
        f.write_bytes(b"\0" * 16)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(prom))
    seen: list[set[str]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: seen.append({f.name for f in prom.iterdir()}))
    r = CliRunner().invoke(app, ["serve", "--port", "1"])
    assert r.exit_code == 0, r.output
    assert seen == [{own.name}]
