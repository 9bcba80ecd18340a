"""/metrics as Prometheus reads it: every request labelled by its route template, help texts
that say what the counters count."""

from __future__ import annotations

import json

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
