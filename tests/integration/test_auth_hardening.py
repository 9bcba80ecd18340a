"""Hardening and observability: body limit, request timeout, request ids, metrics, JSON logs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from broker.observability import configure_logging
from tests.integration.service_support import open_broker, service_client, small_request


def test_body_over_the_limit_is_413_with_or_without_content_length(db_url: str) -> None:
    b = open_broker(db_url, max_body_bytes=2000)
    with service_client(b) as c:
        big = json.dumps(small_request("x" * 150, dry_run=True) | {"pad": "y" * 3000}).encode()
        r = c.post("/v1/placements", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
            yield big[:1000]
            yield big[1000:]

        r = c.post("/v1/placements", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        ok = c.post("/v1/placements", json=small_request(dry_run=True))
        assert ok.status_code == 200


def test_slow_requests_time_out_with_504(db_url: str) -> None:
    b = open_broker(db_url, request_timeout_s=0.001, sync_time_limit_s=0.0005)
    with service_client(b) as c:
        r = c.post("/v1/placements", json=small_request(dry_run=True))
        assert r.status_code == 504 and "async" in r.json()["detail"]


def test_request_ids_metrics_and_json_logs(client, capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [h for h in root.handlers if not getattr(h, "_broker", False)]
    try:
        configure_logging("json")
        r = client.post("/v1/placements", json=small_request("metered"), headers={"X-Request-ID": "req-123"})
        assert r.status_code == 201 and r.headers["x-request-id"] == "req-123"
        generated = client.get("/v1/placements").headers["x-request-id"]
        assert len(generated) == 32
    finally:
        root.handlers = saved
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    access = [x for x in lines if x.get("logger") == "broker.access" and x.get("request_id") == "req-123"]
    assert access and access[0]["status"] == 201 and access[0]["route"] == "/v1/placements"
    text = client.get("/metrics").text
    for name in (
        'broker_http_request_duration_seconds_bucket{le="0.5",method="POST",route="/v1/placements",status="201"}',
        "broker_solve_duration_seconds_count",
        'broker_placements_total{status="optimal",stored="true"}',
        "broker_savings_usd_per_hour_total",
        "broker_job_queue_depth",
    ):
        assert name in text, name
