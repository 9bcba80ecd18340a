"""`broker rl evaluate` / `broker rl train` end to end: the shipped policy on a held-out day, bad
input -> exit 2, training without the rl extra -> exit 1 with the install line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped fleet cut to a dozen workloads at three sites."""
    doc = yaml.safe_load((EXAMPLES / "fleet.yaml").read_text())
    keep = doc["workloads"][::4][:12]
    names = {w["name"] for w in keep}
    for w in keep:
        w["depends_on"] = [d for d in w.get("depends_on", []) if d["workload"] in names]
    doc["workloads"] = keep
    doc["sites"] = ["aws:us-east-1", "aws:us-east-2", "gcp:us-east1"]
    doc["events"]["surge"]["workloads"] = [n for n in doc["events"]["surge"]["workloads"] if n in names]
    path = tmp_path_factory.mktemp("fleet") / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_evaluate_runs_the_shipped_policy_on_held_out_days(small_fleet: Path) -> None:
    args = ["rl", "evaluate", str(small_fleet), "--policies", "kube-default,ppo", "--seeds", "7,1"]
    r = runner.invoke(app, [*args, "--days", "0.25", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert [(row["policy"], row["seed"]) for row in rows] == [
        ("kube-default", 7),
        ("ppo", 7),
        ("kube-default", 1),
        ("ppo", 1),
    ]
    assert all(row["spend_usd"] > 0 for row in rows)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--start-day", "3"], "start_day"),  # a day the shipped policy trained on
        (["--model", "/nonexistent/ppo-v1.npz"], "missing"),
        (["--seeds", "seven"], "--seeds"),
    ],
)
def test_evaluate_refuses_bad_input(small_fleet: Path, extra: list[str], said: str) -> None:
    r = runner.invoke(app, ["rl", "evaluate", str(small_fleet), "--days", "0.1", *extra])
    assert r.exit_code == EXIT_INVALID, r.output
    assert said in r.output


@pytest.mark.skipif(importlib.util.find_spec("sb3_contrib") is not None, reason="the rl extra is installed")
def test_train_without_the_rl_extra_says_how_to_install_it(small_fleet: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["rl", "train", str(small_fleet), "--timesteps", "10", "--out", str(tmp_path / "m")])
    assert r.exit_code == EXIT_FAILED
    assert "pip install -c constraints.txt -e '.[rl]'" in r.output
    assert not (tmp_path / "m").exists()
