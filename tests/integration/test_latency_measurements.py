"""A tenant's own RTT measurements: imported by API or CLI, they win over the catalog's figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.app import Broker
from broker.catalog.latency_measurements import MeasurementStore
from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

OREGON = {"name": "oregon-users", "lat": 45.52, "lon": -122.68}


def _request(slo: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": "oregon api",
        "user_regions": [OREGON],
        "workloads": [
            {
                "name": "api",
                "replicas": 2,
                "cpu": 1,
                "memory_gib": 2,
                "providers": ["aws"],
                "residency": "us-only",
                "latency_slo_ms": {"oregon-users": slo},
            }
        ],
        "dry_run": True,
        "time_limit_s": 5,
        **extra,
    }


def test_measurements_win_in_placements_and_latency(client: TestClient) -> None:
    # the catalog puts aws:us-east-1 at ~64 ms from Oregon users: not within 30 ms
    assert client.post("/v1/placements", json=_request(30)).json()["assignments"][0]["site"] != "aws:us-east-1"
    body = {
        "measurements": [
            {"from": "aws:us-east-1", "to": "oregon-users", "rtt_ms": 12.5, "source": "probe"},
            {"from": "aws:us-east-1", "to": "aws:us-west-2", "rtt_ms": 50, "statistic": "p95", "source": "probe"},
        ]
    }
    r = client.post("/v1/latency/measurements", json=body)
    assert r.status_code == 201, r.text
    assert r.json() == {"rows": 2, "replaced": 0, "tenant": "default"}
    # keep every other US site out, so the measured path decides
    doc = client.post("/v1/placements", json=_request(13)).json()
    assert {a["site"] for a in doc["assignments"]} == {"aws:us-east-1"}
    assert doc["assignments"][0]["latency_ms"]["oregon-users"] == 12.5
    assert doc["assignments"][0]["latency_slo_margin_ms"]["oregon-users"] == 0.5
    # the p50 measurement does not answer a p95 request
    strict = client.post("/v1/placements", json=_request(13, latency_quantile="p95"))
    assert strict.status_code == 422
    # site to site, in either order, for the statistic measured
    q = {"from": "aws:us-west-2", "to": "aws:us-east-1"}
    own = client.get("/v1/latency", params={**q, "quantile": "p95"}).json()
    assert own["rtt_ms"] == 50 and own["method"] == "imported" and own["source"] == "measured"
    assert client.get("/v1/latency", params=q).json()["method"] == "measured"  # the catalog's p50
    # re-import replaces; the listing shows what is stored
    again = client.post("/v1/latency/measurements", json={"measurements": body["measurements"][:1]})
    assert again.json()["replaced"] == 1
    assert client.get("/v1/latency/measurements").json()["total"] == 2


def test_csv_body_and_invalid_rows(client: TestClient) -> None:
    csv = "from,to,rtt_ms,statistic,source\naws:us-east-1,geo:45.52,-122.68,20,p50,probe\n"
    r = client.post("/v1/latency/measurements", content=csv, headers={"content-type": "text/csv"})
    assert r.status_code == 422  # an unquoted comma in the geo point: one column too many
    csv = 'from,to,rtt_ms\naws:us-east-1,"geo:45.52,-122.68",20\n'
    r = client.post("/v1/latency/measurements", content=csv, headers={"content-type": "text/csv"})
    assert r.status_code == 201, r.text
    listed = client.get("/v1/latency/measurements").json()["items"]
    assert listed == [
        {"from": "aws:us-east-1", "to": "geo:45.5200,-122.6800", "rtt_ms": 20.0, "statistic": "p50", "source": "import"}
    ]
    bad = {"measurements": [{"from": "aws:us-east-1", "to": "aws:nowhere-9", "rtt_ms": 5}]}
    r = client.post("/v1/latency/measurements", json=bad)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["loc"] == ["body", "measurements", 0, "to"]
    assert client.get("/v1/latency/measurements").json()["total"] == 1  # nothing of the bad body


def test_cli_import(broker: Broker, db_url: str, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    good = tmp_path / "m.csv"
    good.write_text("from,to,rtt_ms,statistic,source\naws:us-east-1,oregon-users,12.5,p50,probe\n")
    r = CliRunner().invoke(app, ["latency", "import", str(good), "--tenant", "acme"])
    assert r.exit_code == 0, r.output
    assert [m.rtt_ms for m in MeasurementStore(broker.sessions).for_tenant("acme")] == [12.5]
    assert MeasurementStore(broker.sessions).for_tenant("default") == []
    bad = tmp_path / "bad.csv"
    bad.write_text("from,to,rtt_ms\naws:us-east-1,oregon-users,-3\n")
    r = CliRunner().invoke(app, ["latency", "import", str(bad)])
    assert r.exit_code == EXIT_INVALID and "rtt_ms" in r.output
