"""Latency through the API: /v1/latency with geo ends and statistics, SLOs of placements."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

OREGON = {"name": "oregon-users", "lat": 45.52, "lon": -122.68}
VIRGINIA = {"name": "virginia-users", "lat": 38.9, "lon": -77.03}


def _rtt(client: TestClient, src: str, dst: str, quantile: str = "p50") -> dict[str, Any]:
    r = client.get("/v1/latency", params={"from": src, "to": dst, "quantile": quantile})
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_latency_accepts_geo_on_either_side(shared_client: TestClient) -> None:
    fwd = _rtt(shared_client, "aws:us-east-1", "geo:45.52,-122.68")
    bwd = _rtt(shared_client, "geo:45.52,-122.68", "aws:us-east-1")
    assert fwd["rtt_ms"] == bwd["rtt_ms"] and fwd["source"] == "estimated"
    assert fwd["method"] == "anchored" and len(fwd["via"]) == 2 and fwd["quantile"] == "p50"
    # us-east-1 <-> us-west-2 measures 68-70 ms; the old envelope said 158 ms
    assert 60 <= fwd["rtt_ms"] <= 90
    users = _rtt(shared_client, "geo:45.52,-122.68", "geo:38.9,-77.03")
    assert users["source"] == "estimated" and users["rtt_ms"] > fwd["rtt_ms"] - 20


def test_p95_is_conservative_and_measured_pairs_say_so(shared_client: TestClient) -> None:
    for dst in ("geo:35.68,139.69", "aws:eu-west-1"):
        p50 = _rtt(shared_client, "aws:ap-south-1", dst)
        p95 = _rtt(shared_client, "aws:ap-south-1", dst, "p95")
        assert p95["rtt_ms"] >= p50["rtt_ms"] and p95["quantile"] == "p95"
    assert _rtt(shared_client, "aws:ap-south-1", "aws:eu-west-1")["method"] == "measured"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "geo:91,0", "to": "aws:eu-west-1"}, "from"),
        ({"from": "aws:eu-west-1", "to": "aws:eu-west-1", "quantile": "p99"}, "quantile"),
    ],
)
def test_latency_bad_input_names_the_field(shared_client: TestClient, params: dict[str, str], field: str) -> None:
    r = shared_client.get("/v1/latency", params=params)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["loc"][-1] == field


def _fleet(n: int, slos: dict[str, float], **extra: Any) -> dict[str, Any]:
    """A pipeline-sized request: n services of mixed sizes, all with the same user SLOs."""
    sizes = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (2.0, 8.0), (4.0, 16.0)]
    return {
        "name": "us fleet",
        "user_regions": [OREGON, VIRGINIA],
        "workloads": [
            {
                "name": f"svc-{i}",
                "replicas": 1 + i % 3,
                "cpu": sizes[i % len(sizes)][0],
                "memory_gib": sizes[i % len(sizes)][1],
                "latency_slo_ms": dict(slos),
            }
            for i in range(n)
        ],
        "dry_run": True,
        "time_limit_s": 5,
        **extra,
    }


def test_ordinary_user_slos_are_placed_with_margins(shared_client: TestClient) -> None:
    # the request (300 workloads there) answered 422 although us-west-2 meets both SLOs
    slos = {"oregon-users": 80.0, "virginia-users": 120.0}
    west = {u["name"]: _rtt(shared_client, "aws:us-west-2", f"geo:{u['lat']},{u['lon']}") for u in (OREGON, VIRGINIA)}
    assert all(west[k]["rtt_ms"] <= slo for k, slo in slos.items())
    r = shared_client.post("/v1/placements", json=_fleet(300, slos))
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["status"] in ("optimal", "feasible") and doc["latency_quantile"] == "p50"
    assert sum(a["replicas"] for a in doc["assignments"]) == sum(1 + i % 3 for i in range(300))
    for a in doc["assignments"]:
        assert set(a["latency_slo_margin_ms"]) == set(slos)
        for region, slo in slos.items():
            assert a["latency_ms"][region] <= slo
            assert a["latency_slo_margin_ms"][region] >= 0
            assert a["latency_slo_margin_ms"][region] == pytest.approx(slo - a["latency_ms"][region], abs=0.11)


def test_p95_requests_check_slos_against_the_conservative_figure(shared_client: TestClient) -> None:
    # an SLO between the best typical and the best conservative RTT to Oregon users
    sites = [s["id"] for s in shared_client.get("/v1/sites", params={"country": "US"}).json()]
    best = {
        q: min(_rtt(shared_client, s, "geo:45.52,-122.68", q)["rtt_ms"] for s in sites if ":" in s)
        for q in ("p50", "p95")
    }
    assert best["p95"] > best["p50"] + 1
    slo = {"oregon-users": round((best["p50"] + best["p95"]) / 2, 1)}
    typical = shared_client.post("/v1/placements", json=_fleet(3, slo))
    assert typical.status_code == 200, typical.text
    strict = shared_client.post("/v1/placements", json=_fleet(3, slo, latency_quantile="p95"))
    assert strict.status_code == 422, strict.text
    assert any(c.startswith("latency_slo_ms:oregon-users<=") for c in strict.json()["conflicts"])
    bad = shared_client.post("/v1/placements", json=_fleet(1, slo, latency_quantile="p90"))
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "latency_quantile"]
