"""Integration objects over the API and the CLI: Karpenter NodeOverlays, Karmada PropagationPolicies."""

from __future__ import annotations

import jsonschema
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.cli.main import app
from tests.unit.integrations.nodeoverlay_schema import NODE_OVERLAY


def test_overlays_carry_the_stored_discounts_and_commitments(client: TestClient) -> None:
    r = client.post(
        "/v1/pricing/discounts",
        json={"provider": "aws", "discount_pct": 15, "family": "m6i.*", "region": "eu-central-1"},
    )
    assert r.status_code in (200, 201), r.text
    r = client.post(
        "/v1/pricing/commitments", json={"site": "aws:eu-central-1", "instance_type": "m6i.xlarge", "count": 4}
    )
    assert r.status_code in (200, 201), r.text

    plain = list(yaml.safe_load_all(client.get("/v1/integrations/karpenter/nodeoverlays").text))
    assert [o["spec"]["priceAdjustment"] for o in plain] == ["-15%"]
    both = list(yaml.safe_load_all(client.get("/v1/integrations/karpenter/nodeoverlays?commitments=true").text))
    assert len(both) == 2
    for overlay in both:
        jsonschema.validate(overlay, NODE_OVERLAY)
    types = {r["key"]: r["values"] for r in both[0]["spec"]["requirements"]}["node.kubernetes.io/instance-type"]
    assert "m6i.xlarge" in types and all(t.startswith("m6i.") for t in types)
    assert both[1]["spec"]["price"] == "0.000000"


def test_a_region_glob_lists_regions_not_local_zones(client: TestClient) -> None:
    """A Local or Wavelength Zone's nodes carry their parent region's label: an overlay's region
    values are regions only (eu-central-1-ham-1 is no value of topology.kubernetes.io/region)."""
    r = client.post(
        "/v1/pricing/discounts",
        json={"provider": "aws", "discount_pct": 10, "family": "m6i.*", "region": "eu-central-*"},
    )
    assert r.status_code in (200, 201), r.text
    (overlay,) = yaml.safe_load_all(client.get("/v1/integrations/karpenter/nodeoverlays").text)
    regions = {r["key"]: r["values"] for r in overlay["spec"]["requirements"]}["topology.kubernetes.io/region"]
    assert "eu-central-1" in regions and all(r.count("-") == 2 for r in regions), regions


def test_a_provider_karpenter_does_not_run_on_is_a_422_naming_the_field(client: TestClient) -> None:
    r = client.get("/v1/integrations/karpenter/nodeoverlays?provider=gcp")
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == ["query", "provider"]


def test_cli_writes_yaml_on_stdout_and_notes_on_stderr(db_url: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    runner = CliRunner()
    assert (
        runner.invoke(app, ["pricing", "discount", "--provider", "aws", "--pct", "8", "--family", "zz*"]).exit_code == 0
    )
    result = runner.invoke(app, ["export", "karpenter", "--provider", "aws"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""  # the only rule matches nothing: no documents, a note on stderr
    assert "matches no aws instance type" in result.stderr
    assert "0 NodeOverlay objects: no discount rule for aws produced one" in result.stderr
    assert runner.invoke(app, ["export", "karpenter", "--provider", "edge"]).exit_code == 2


def test_karmada_policies_for_a_stored_placement(client: TestClient) -> None:
    from tests.integration.dispatch_support import store_checkout

    broker = client.app.state.broker  # type: ignore[attr-defined]
    placement = store_checkout(broker)
    sites = sorted({a["site"] for a in placement["assignments"]})
    members = [f"{s}=member-{i}" for i, s in enumerate(sites)]
    url = f"/v1/integrations/karmada/placements/{placement['id']}"
    r = client.get(url, params={"namespace": "shop", "member": members})
    assert r.status_code == 200, r.text
    policies = list(yaml.safe_load_all(r.text))
    by_workload = {p["spec"]["resourceSelectors"][0]["name"]: p for p in policies}
    for workload in {a["workload"] for a in placement["assignments"]}:
        weights = by_workload[workload]["spec"]["placement"]["replicaScheduling"]["weightPreference"][
            "staticWeightList"
        ]
        placed = sum(a["replicas"] for a in placement["assignments"] if a["workload"] == workload)
        assert sum(w["weight"] for w in weights) == placed
    missing = client.get(url, params={"member": members[:1]})
    if len(sites) > 1:
        assert missing.status_code == 422 and "no member cluster" in missing.json()["detail"]
    assert client.get("/v1/integrations/karmada/placements/pl_nope").status_code == 404
