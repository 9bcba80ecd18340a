"""Private and edge sites: `broker sites import`, POST /v1/sites, and placing on them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.app import Broker
from broker.cli.main import app as cli
from broker.settings import Settings

SITES = Path(__file__).resolve().parents[1] / "fixtures" / "sites" / "fra-dc1.yaml"


def tco(hardware_usd, amortization_months, power_kw, pue, usd_per_kwh, monthly_usd):
    return hardware_usd / amortization_months / 730 + power_kw * pue * usd_per_kwh + monthly_usd / 730


def _workload(**kw):
    base = {"name": "app", "replicas": 2, "cpu": 4, "memory_gib": 16}
    return {**base, **kw}


@pytest.fixture(scope="module")
def imported(module_db_url: str) -> Iterator[tuple[str, str, TestClient]]:
    """One database with the sites imported through the CLI, shared by the placement tests:
    every import bumps the catalog version, and rebuilding the in-memory catalog costs seconds."""
    url = module_db_url
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BROKER_DATABASE_URL", url)
        result = CliRunner().invoke(cli, ["sites", "import", str(SITES)])
    from api.app import create_app

    with TestClient(create_app(broker=Broker.open(Settings(database_url=url), prepare=False))) as client:
        yield url, result.output if result.exit_code == 0 else f"exit {result.exit_code}: {result.output}", client


def test_cli_import_then_place_on_the_only_site_the_residency_allows(imported, monkeypatch, tmp_path):
    url, output, _client = imported
    assert "private:lux-dc2/r650-small/reserved" in output, output
    monkeypatch.setenv("BROKER_DATABASE_URL", url)
    request = tmp_path / "lu.yaml"
    request.write_text(
        yaml.safe_dump(
            {"name": "lu-only", "dry_run": True, "workloads": [_workload(residency={"allowed_countries": ["LU"]})]}
        )
    )
    placed = CliRunner().invoke(cli, ["place", "-f", str(request), "--format", "json"])
    assert placed.exit_code == 0, placed.output
    doc = json.loads(placed.stdout)
    assert {a["site"] for a in doc["assignments"]} == {"private:lux-dc2"}
    (node,) = doc["nodes"]
    assert node["pool"] == "private:lux-dc2/r650-small/reserved"
    assert node["count"] == 1  # 2 x (4 vCPU, 16 GiB) fit on one 16 vCPU / 64 GiB node
    assert node["cost_per_hour"] == pytest.approx(tco(9000, 36, 0.3, 1.5, 0.18, 60), abs=1e-4)


def test_tco_priced_private_site_wins_a_germany_only_request(imported):
    _url, _output, client = imported
    pool = client.get("/v1/pools/private:fra-dc1/r740-std/reserved").json()
    assert pool["max_nodes"] == 40
    assert pool["price_source"] == "tco-model"
    assert pool["price_per_hour"] == pytest.approx(tco(18000, 48, 0.45, 1.4, 0.21, 120), abs=1e-6)
    edge = client.get("/v1/pools/edge:munich-store-17/nuc-i7/reserved").json()
    assert edge["price_per_hour"] == pytest.approx(95 / 730, abs=1e-6)
    sites = {s["id"]: s for s in client.get("/v1/sites", params={"kind": "private"}).json()}
    assert sites["private:fra-dc1"]["jurisdictions"] == ["EU", "EEA", "DE"]

    # A big-memory workload: a 48 vCPU / 384 GiB owned node at ~0.81 USD/h beats every
    # German public-cloud VM of that size, so the solver must choose it.
    body = {
        "name": "de-only",
        "dry_run": True,
        "workloads": [_workload(cpu=40, memory_gib=300, residency={"allowed_countries": ["DE"]})],
    }
    placed = client.post("/v1/placements", json=body)
    assert placed.status_code == 200, placed.text
    assert {a["pool"] for a in placed.json()["assignments"]} == {"private:fra-dc1/r740-std/reserved"}
    snap = placed.json()["price_snapshot"]  # what the answer was priced with
    assert snap["pools"]["private:fra-dc1/r740-std/reserved"]["price_source"] == "tco-model"
    assert snap["stale_pools"] == []  # imported just now

    # a public-cloud answer is priced from the bundled snapshot, months old: flagged stale
    body["workloads"] = [_workload(residency={"allowed_countries": ["DE"]}, providers=["aws"])]
    snap = client.post("/v1/placements", json=body).json()["price_snapshot"]
    assert snap["stale_pools"] and all(p.startswith("aws:") for p in snap["stale_pools"])


def test_max_nodes_bounds_the_private_pool(imported):
    _url, _output, client = imported
    # lux-dc2 has 3 nodes of 16 vCPU = 48: 4 replicas of 13 vCPU cannot fit there and LU has no cloud
    body = {
        "name": "too-big",
        "dry_run": True,
        "workloads": [_workload(replicas=4, cpu=13, memory_gib=8, residency={"allowed_countries": ["LU"]})],
    }
    r = client.post("/v1/placements", json=body)
    assert r.status_code == 422
    assert r.json()["conflicts"]


def _current(client: TestClient, pool: str) -> dict | None:
    return client.get(f"/v1/pools/{pool}/history").json().get("current")  # from the store, no catalog rebuild


def test_api_post_sites_and_reimport_replaces_node_types(client):
    doc = yaml.safe_load(SITES.read_text())
    r = client.post("/v1/sites", json=doc)
    assert r.status_code == 201, r.text
    assert r.json()["pools"] == 3
    lux = next(s for s in doc["sites"] if s["id"] == "private:lux-dc2")
    lux["node_types"][0]["name"] = "r660-new"
    assert client.post("/v1/sites", json={"sites": [lux]}).status_code == 201
    gone = client.get("/v1/pools/private:lux-dc2/r650-small/reserved/history").json()
    assert gone["current"] is None and gone["history"]  # the pool is gone, its price history stays
    assert _current(client, "private:lux-dc2/r660-new/reserved")["price_source"] == "tco-model"


GOOD_SITE = (
    "{id: 'private:ok', kind: private, country: DE,"
    " node_types: [{name: a, vcpus: 4, memory_gib: 8, count: 1, flat_monthly_usd: 5}]}"
)
NT = "name: a, vcpus: 4, memory_gib: 8, count: 1"
BAD = [  # (second site of the file, or a whole file; field named in the error; reason)
    (
        f"{{id: 'private:x', kind: private, country: DE, node_types: [{{{NT}}}]}}",
        "sites.1.node_types.0",
        "exactly one of tco or flat_monthly_usd",
    ),
    (
        f"{{id: 'edge:x', kind: private, country: DE, node_types: [{{{NT}, flat_monthly_usd: 5}}]}}",
        "sites.1",
        "must start with 'private:'",
    ),
    (
        f"{{id: 'private:x', kind: private, country: Germany, node_types: [{{{NT}, flat_monthly_usd: 5}}]}}",
        "sites.1.country",
        "pattern",
    ),
    (
        f"{{id: 'private:x', kind: private, country: DE, node_types: [{{{NT}, tco: {{hardware_usd: 1,"
        f" amortization_months: 0, power_kw: 1, pue: 1.2, usd_per_kwh: 0.1}}}}]}}",
        "sites.1.node_types.0.tco.amortization_months",
        "greater than 0",
    ),
    (GOOD_SITE, "sites", "duplicate site id"),
    ("FILE:sites: [{id: 'private:x'", "", "not valid YAML"),
    ("FILE:- just a list", "", "mapping"),
]


@pytest.mark.parametrize(("site", "field", "reason"), BAD)
def test_invalid_file_exits_2_names_file_field_reason_and_changes_nothing(
    db_url, monkeypatch, tmp_path, site, field, reason
):
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    bad = tmp_path / "bad-sites.yaml"
    # a valid site first: it must not be stored either, an import is all or nothing
    text = site[5:] if site.startswith("FILE:") else f"sites:\n  - {GOOD_SITE}\n  - {site}\n"
    bad.write_text(text)
    r = CliRunner().invoke(cli, ["sites", "import", str(bad)])
    assert r.exit_code == 2, r.output
    flat = "".join(r.output.split())  # rich wraps long lines
    assert str(bad) in flat
    assert field in flat
    assert "".join(reason.split()) in flat
    from sqlalchemy import select

    from broker.db.models import SiteRow
    from broker.db.session import make_engine, session_factory

    with session_factory(make_engine(db_url))() as s:
        assert not list(s.scalars(select(SiteRow.id).where(SiteRow.provider.in_(["private", "edge"]))))


def test_api_rejects_invalid_document_with_field(client):
    r = client.post(
        "/v1/sites",
        json={"sites": [{"id": "private:x", "kind": "private", "country": "DE", "node_types": []}]},
    )
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert any(e["loc"][-1] == "node_types" for e in r.json()["errors"])
