"""`broker latency evaluate`: held-out accuracy from the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from broker.cli.main import app
from pricing import snapshot

runner = CliRunner()


def test_evaluate_bundled_pairs_json() -> None:
    r = runner.invoke(app, ["latency", "evaluate", "--no-by-region", "--format", "json", "--check"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (ev,) = doc["evaluations"]
    assert ev["scheme"].startswith("5-fold")
    assert set(ev["scores"]) == {"p50", "p95"}
    assert ev["scores"]["p50"]["n"] == len(snapshot.read_latency()) // 2
    assert all(t["met"] for t in doc["targets"])


def test_evaluate_table_names_the_settings() -> None:
    r = runner.invoke(app, ["latency", "evaluate", "--no-by-region", "--folds", "3"])
    assert r.exit_code == 0, r.output
    assert "p50" in r.stdout and "p95" in r.stdout and "median_ape_pct" in r.stdout


def _some_pairs(tmp_path: Path, rtt: list[float] | None = None) -> Path:
    lat = snapshot.read_latency()
    lat = lat[lat["src"].astype(str) < lat["dst"].astype(str)].head(400)
    df = pd.DataFrame({"src": lat["src"].astype(str), "dst": lat["dst"].astype(str), "rtt_ms": lat["rtt_ms"]})
    if rtt is not None:
        df["rtt_ms"] = rtt[: len(df)]
    path = tmp_path / "pairs.csv"
    df.to_csv(path, index=False)
    return path


def test_check_fails_on_pairs_no_model_can_predict(tmp_path: Path) -> None:
    rnd = random.Random(3)
    noise = [rnd.uniform(1.0, 400.0) for _ in range(400)]  # RTT unrelated to place
    path = _some_pairs(tmp_path, noise)
    r = runner.invoke(app, ["latency", "evaluate", "--no-by-region", "--file", str(path), "--check"])
    assert r.exit_code == EXIT_FAILED, r.output
    assert "missed" in r.stdout


def test_own_file_without_p95_is_evaluated(tmp_path: Path) -> None:
    path = _some_pairs(tmp_path)
    r = runner.invoke(app, ["latency", "evaluate", "--no-by-region", "--format", "json", "--file", str(path)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["evaluations"][0]["scores"]["p50"]["n"] > 300


def test_invalid_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("from,to,ms\na,b,1\n")
    r = runner.invoke(app, ["latency", "evaluate", "--file", str(bad)])
    assert r.exit_code == EXIT_INVALID
    assert "rtt_ms" in r.output
    r = runner.invoke(app, ["latency", "evaluate", "--file", str(tmp_path / "missing.csv")])
    assert r.exit_code == EXIT_INVALID
