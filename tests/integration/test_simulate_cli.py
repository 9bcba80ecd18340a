"""`broker simulate` end to end: the shipped fleet, outputs on disk, bad input -> exit 2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped fleet cut to its first dozen workloads and three sites, forecast by the baseline."""
    doc = yaml.safe_load((EXAMPLES / "fleet.yaml").read_text())
    keep = doc["workloads"][::4][:12]
    names = {w["name"] for w in keep}
    for w in keep:
        w["depends_on"] = [d for d in w.get("depends_on", []) if d["workload"] in names]
    doc["workloads"] = keep
    doc["sites"] = ["aws:us-east-1", "aws:us-east-2", "gcp:us-east1"]
    doc["events"]["site_outage"]["site"] = "aws:us-east-2"
    doc["events"]["surge"]["workloads"] = [n for n in doc["events"]["surge"]["workloads"] if n in names]
    doc["policies"]["broker"]["forecast"] = "baseline"
    path = tmp_path_factory.mktemp("fleet") / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _write(tmp_path: Path, doc: dict) -> Path:
    p = tmp_path / "fleet.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_simulate_writes_csv_and_parquet(small_fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = runner.invoke(app, ["simulate", str(small_fleet), "--days", "0.25", "--out", str(out)])
    assert r.exit_code == 0, r.output
    for policy in ("kube-default", "cheapest-fit", "karpenter-like", "broker"):
        assert policy in r.stdout
    summary = pd.read_parquet(out / "summary.parquet")
    assert list(summary["policy"]) == ["kube-default", "cheapest-fit", "karpenter-like", "broker"]
    assert (summary["spend_usd"] > 0).all()
    assert pd.read_csv(out / "summary.csv").shape == summary.shape
    series = pd.read_parquet(out / "series.parquet")
    assert len(series) == 4 * 72  # 6 hours of 5-minute steps per policy
    assert {"spend_per_hour", "cpu_utilisation", "starved_core_min"} <= set(series.columns)
    assert (out / "events.csv").exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["workloads"][0].update(cpu=-2), "workloads.0.cpu"),
        (lambda d: d["workloads"][1]["usage"].update(series="az0000"), "workloads.1.usage.series"),
        (lambda d: d["sites"].append("aws:atlantis-1"), "sites.3"),
        (lambda d: d.update(days=30), "days"),
        (lambda d: d["policies"].update({"kube-magic": {}}), "'kube-magic'; known: broker, cheapest-fit"),
    ],
)
def test_bad_fleet_exits_2_naming_the_field(small_fleet: Path, tmp_path: Path, change, field: str) -> None:
    doc = yaml.safe_load(small_fleet.read_text())
    change(doc)
    r = runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--policies", "kube-default"])
    assert r.exit_code == EXIT_INVALID, r.output
    assert field in r.stderr


def test_unknown_policy_exits_2(small_fleet: Path) -> None:
    r = runner.invoke(app, ["simulate", str(small_fleet), "--policies", "kube-default,nope"])
    assert r.exit_code == EXIT_INVALID
    assert "unknown policy 'nope'" in r.stderr


def test_missing_file_exits_2(tmp_path: Path) -> None:
    r = runner.invoke(app, ["simulate", str(tmp_path / "none.yaml")])
    assert r.exit_code == EXIT_INVALID
    assert "cannot read" in r.stderr


@pytest.mark.slow
def test_the_shipped_fleet_runs(tmp_path: Path) -> None:
    """examples/fleet.yaml as shipped (XGBoost forecast, every event), half a day."""
    r = runner.invoke(app, ["simulate", str(EXAMPLES / "fleet.yaml"), "--days", "0.5", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    summary = pd.read_csv(tmp_path / "summary.csv").set_index("policy")
    assert summary.loc["broker", "spend_usd"] < summary.loc["kube-default", "spend_usd"]


def test_less_than_one_step_exits_2_saying_so(small_fleet: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["simulate", str(small_fleet), "--days", "0.001"])
    assert r.exit_code == EXIT_INVALID, r.output
    said = " ".join(r.stderr.replace("│", " ").split())  # click's box wraps the message
    assert "'--days': must be a finite number ≥ 0.00347222 (one 5-minute step), not 0.001" in said
    doc = yaml.safe_load(small_fleet.read_text())
    doc["days"] = 0.001
    r = runner.invoke(app, ["simulate", str(_write(tmp_path, doc))])
    assert r.exit_code == EXIT_INVALID, r.output
    assert "days: Value error, must be at least one 5-minute step (0.00347 days), not 0.001" in " ".join(
        r.stderr.split()
    )


def test_every_offending_field_is_named_at_once(small_fleet: Path, tmp_path: Path) -> None:
    doc = yaml.safe_load(small_fleet.read_text())
    doc["policies"]["kube-default"]["instance_type"] = "t3.nano"
    doc["workloads"][1]["usage"]["series"] = "az0000"
    r = runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--policies", "kube-default,nope"])
    assert r.exit_code == EXIT_INVALID, r.output
    said = " ".join(r.stderr.split())
    for field in ("unknown policy 'nope'", "workloads.1.usage.series", "policies.kube-default.instance_type"):
        assert field in said, field


def test_a_run_whose_broker_solves_ran_out_of_time_prints_a_warning(small_fleet: Path, tmp_path: Path) -> None:
    doc = yaml.safe_load(small_fleet.read_text())
    doc["policies"]["broker"]["time_limit_s"] = 0.001
    r = runner.invoke(app, ["simulate", str(_write(tmp_path, doc)), "--days", "0.05", "--policies", "broker"])
    assert r.exit_code == 0, r.output
    assert "warning: broker policy: a solve at 0 s ran into time_limit_s (0.001 s)" in " ".join(r.stderr.split())


def test_simulate_says_up_front_how_long_it_will_take(small_fleet: Path) -> None:
    r = runner.invoke(app, ["simulate", str(small_fleet), "--days", "0.1", "--policies", "kube-default,broker"])
    assert r.exit_code == 0, r.output
    said = [line for line in r.output.splitlines() if line.startswith("replaying ")]
    assert len(said) == 1, r.output
    assert said[0].startswith("replaying 11 workloads x 29 steps x 2 policies, about 1 broker solve: ")
    assert ": expect about " in said[0]
    assert r.output.index(said[0]) < r.output.index("spend $")  # before the run's figures


def test_simulate_store_keeps_the_run_for_the_api_and_the_dashboard(env: str, small_fleet: Path) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from broker.app import Broker
    from broker.settings import Settings

    args = ["simulate", str(small_fleet), "--days", "0.1", "--policies", "kube-default,cheapest-fit", "--store"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    stored = [line for line in r.output.splitlines() if line.startswith("stored as sim_")]
    assert stored, r.output
    sid = stored[0].split()[2].rstrip(":")
    with TestClient(create_app(broker=Broker.open(Settings(database_url=env)))) as client:
        page = client.get("/v1/simulations").json()
        sim = client.get(f"/v1/simulations/{sid}").json()
        dashboard = client.get("/dashboard/simulations")
    assert [s["id"] for s in page["items"]] == [sid]
    assert page["items"][0]["source"] == "cli" and page["items"][0]["status"] == "succeeded"
    assert [row["policy"] for row in sim["summary"]] == ["kube-default", "cheapest-fit"]
    assert set(sim["series"]) == {"kube-default", "cheapest-fit"} and len(sim["series"]["kube-default"]["hour"]) == 29
    assert sim["days"] == 0.1 and sim["progress"] == 1.0
    assert dashboard.status_code == 200 and "broker simulate" in dashboard.text  # how to get a run there


def test_simulate_without_store_opens_no_database(
    tmp_path: Path, small_fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "never.db"
    monkeypatch.setenv("BROKER_DATABASE_URL", f"sqlite:///{db}")
    r = runner.invoke(app, ["simulate", str(small_fleet), "--days", "0.02", "--policies", "kube-default"])
    assert r.exit_code == 0, r.output
    assert not db.exists()
