"""Private and edge sites: `broker sites import`, POST /v1/sites, and placing on them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from broker.cli import app as cli

SITES = Path(__file__).resolve().parents[1] / "fixtures" / "sites" / "fra-dc1.yaml"


def tco(hardware_usd, amortization_months, power_kw, pue, usd_per_kwh, monthly_usd):
    return hardware_usd / amortization_months / 730 + power_kw * pue * usd_per_kwh + monthly_usd / 730


def _workload(**kw):
    base = {"name": "app", "replicas": 2, "cpu": 4, "memory_gib": 16}
    return {**base, **kw}


def test_cli_import_then_place_on_the_only_site_the_residency_allows(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    runner = CliRunner()
    imported = runner.invoke(cli, ["sites", "import", str(SITES)])
    assert imported.exit_code == 0, imported.output
    assert "private:lux-dc2/r650-small/reserved" in imported.output

    request = tmp_path / "lu.yaml"
    request.write_text(
        yaml.safe_dump(
            {
                "name": "lu-only",
                "dry_run": True,
                "workloads": [_workload(residency={"allowed_countries": ["LU"]})],
            }
        )
    )
    placed = runner.invoke(cli, ["place", "-f", str(request), "--format", "json"])
    assert placed.exit_code == 0, placed.output
    doc = __import__("json").loads(placed.stdout)
    assert {a["site"] for a in doc["assignments"]} == {"private:lux-dc2"}
    (node,) = doc["nodes"]
    assert node["pool"] == "private:lux-dc2/r650-small/reserved"
    assert node["count"] == 1  # 2 x (4 vCPU, 16 GiB) fit on one 16 vCPU / 64 GiB node
    assert node["cost_per_hour"] == pytest.approx(tco(9000, 36, 0.3, 1.5, 0.18, 60), abs=1e-4)


def test_api_private_site_priced_by_tco_wins_a_germany_only_request(client):
    doc = yaml.safe_load(SITES.read_text())
    r = client.post("/v1/sites", json=doc)
    assert r.status_code == 201, r.text
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


def test_max_nodes_bounds_the_private_pool(client):
    client.post("/v1/sites", json=yaml.safe_load(SITES.read_text()))
    # lux-dc2 has 3 nodes of 16 vCPU = 48: 4 replicas of 13 vCPU cannot fit there and LU has no cloud
    body = {
        "name": "too-big",
        "dry_run": True,
        "workloads": [_workload(replicas=4, cpu=13, memory_gib=8, residency={"allowed_countries": ["LU"]})],
    }
    r = client.post("/v1/placements", json=body)
    assert r.status_code == 422
    assert r.json()["conflicts"]


def test_reimport_replaces_node_types(client):
    doc = yaml.safe_load(SITES.read_text())
    client.post("/v1/sites", json=doc)
    lux = next(s for s in doc["sites"] if s["id"] == "private:lux-dc2")
    lux["node_types"][0]["name"] = "r660-new"
    assert client.post("/v1/sites", json={"sites": [lux]}).status_code == 201
    assert client.get("/v1/pools/private:lux-dc2/r650-small/reserved").status_code == 404
    assert client.get("/v1/pools/private:lux-dc2/r660-new/reserved").json()["max_nodes"] == 3


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
    from broker.services import Broker
    from broker.settings import Settings

    sites = Broker.open(Settings(database_url=db_url), prepare=False).catalog().sites
    assert not [s for s in sites if s.startswith("private:")]


def test_api_rejects_invalid_document_with_field(client):
    r = client.post(
        "/v1/sites",
        json={"sites": [{"id": "private:x", "kind": "private", "country": "DE", "node_types": []}]},
    )
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert any(e["loc"][-1] == "node_types" for e in r.json()["errors"])
