"""Usage ingestion over REST and forecast-driven sizing of placements (real SQLite, full catalog)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from broker.app import Broker
from broker.forecast.model import TrainParams
from broker.usage.service import UsageStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usage"


def usage_csv(series: str = "az1633748", cores: float = 8.0) -> tuple[str, pd.DataFrame]:
    """Real Azure CPU % of one VM as the cores a workload of `cores` cores used."""
    df = pd.read_csv(FIXTURES / "azure_4x4d.csv.gz")
    df = df[df["series_id"] == series].assign(value=lambda d: d["value"] / 100 * cores)
    return df[["timestamp", "value"]].to_csv(index=False), df


def request(demand: dict[str, Any], *, cpu: float = 8.0, replicas: int = 2) -> dict[str, Any]:
    return {
        "name": "sized",
        "workloads": [
            {
                "name": "api",
                "replicas": replicas,
                "cpu": cpu,
                "memory_gib": 2.0,
                "residency": "gdpr-eu",
                "demand": demand,
            }
        ],
        "dry_run": True,
    }


@pytest.mark.both_backends
def test_post_csv_and_json_then_summary(client: TestClient) -> None:
    text, df = usage_csv()
    r = client.post("/v1/workloads/api/usage", content=text, headers={"content-type": "text/csv"})
    assert r.status_code == 201, r.text
    assert r.json()["rows"] == len(df) and r.json()["series"] == ["api"]
    samples = [{"timestamp": "2023-11-15T00:00:00Z", "value": 12.5, "metric": "memory_gib"}]
    assert client.post("/v1/workloads/api/usage", json={"samples": samples}).status_code == 201
    got = client.get("/v1/workloads/api/usage").json()
    assert got["metrics"]["cpu"]["samples"] == len(df)
    assert got["metrics"]["memory_gib"] == {"samples": 1, "first_ts": 1700006400, "last_ts": 1700006400}


@pytest.mark.parametrize(
    ("body", "ctype", "loc"),
    [
        ("timestamp,value\n1700000000,1\n1700000300,-3\n", "text/csv", ["line", 3, "value"]),
        ("timestamp,value\n1700000000,NaN?\n", "text/csv", ["line", 2, "value"]),
        ('{"samples": []}', "application/json", ["body", "samples"]),
        ('{"samples": [{"timestamp": "later", "value": 1}]}', "application/json", ["line", 2, "timestamp"]),
        ("not json", "application/json", ["body"]),
        # unknown fields are refused, as in every other request body: a misspelt metric is not a cpu sample
        (
            '{"samples": [{"timestamp": 1700000000, "value": 1, "metrc": "memory_gib"}]}',
            "application/json",
            ["body", "samples", 0, "metrc"],
        ),
        (
            '{"samples": [{"timestamp": 1700000000, "value": 1}], "series": "web"}',
            "application/json",
            ["body", "series"],
        ),
    ],
)
def test_bad_usage_is_422_and_stores_nothing(client: TestClient, body: str, ctype: str, loc: list[Any]) -> None:
    r = client.post("/v1/workloads/api/usage", content=body, headers={"content-type": ctype})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert any(e["loc"] == loc for e in r.json()["errors"]), r.json()
    if loc[0] == "body" and len(loc) > 1:  # the detail names the field too, as for every request body
        assert ".".join(map(str, loc)) in r.json()["detail"], r.json()
    assert client.get("/v1/workloads/api/usage").status_code == 404


@pytest.mark.both_backends
def test_placement_sized_from_a_stored_series(client: TestClient, broker: Broker) -> None:
    text, df = usage_csv(cores=8.0)
    assert client.post("/v1/workloads/api/usage", content=text, headers={"content-type": "text/csv"}).status_code == 201
    UsageStore(broker.sessions).train(horizon=288, params=TrainParams(rounds=15))
    r = client.post("/v1/placements", json=request({"series": "api", "headroom_pct": 25}))
    assert r.status_code == 200, r.text
    doc = r.json()
    rs = doc["rightsizing"]
    w = rs["workloads"][0]
    assert w["model_version"] == 1 and w["cpu"]["method"] == "xgboost" and w["memory_gib"] is None
    # the extension: which forecaster sized it, chosen and backtested before the origin
    stored = UsageStore(broker.sessions).latest_selected("cpu")
    assert stored is not None and w["cpu"]["forecaster"] == stored[1].choices["api"].forecaster
    assert w["cpu"]["backtest_mae"] == pytest.approx(stored[1].choices["api"].backtest_mae, abs=1e-4)
    assert w["cpu"]["regime_shift"] is stored[1].choices["api"].regime_shift
    # the sized request: p95 peak of the workload's total, + 25 %, over 2 replicas
    assert w["cpu"]["forecast"] == pytest.approx(max(0.05, w["cpu"]["p95_peak"] * 1.25 / 2), rel=1e-3)
    assert w["cpu"]["declared"] == 8.0 and w["cpu"]["forecast"] < 8.0
    assert w["cpu"]["p95_peak"] <= df["value"].max() * 2  # a sane band, not a runaway
    # the answer's replicas fit the sized request, and the saving is two solved costs apart
    assert rs["cost_per_hour"] == doc["cost_per_hour"]
    assert rs["declared_cost_per_hour"] > doc["cost_per_hour"]
    assert rs["savings_per_hour"] == pytest.approx(rs["declared_cost_per_hour"] - doc["cost_per_hour"], abs=1e-6)
    declared = client.post(
        "/v1/placements",
        json=request({"series": "api"})
        | {"workloads": [{k: v for k, v in request({})["workloads"][0].items() if k != "demand"}]},
    ).json()
    assert declared["rightsizing"] is None
    assert declared["cost_per_hour"] == pytest.approx(rs["declared_cost_per_hour"], rel=1e-6)
    # the home-cloud packer runs the declared requests, sized or not: the same figure; the headline
    # packer runs the requests as solved (what sizing saves is the rightsizing report's figure)
    assert doc["baseline"]["policy"] == "kubernetes-packer"

    def home(d: dict[str, Any]) -> dict[str, Any]:
        return next(b for b in d["baselines"] if b["policy"] == "kubernetes-packer-home-cloud")

    assert home(doc)["cost_per_hour"] == home(declared)["cost_per_hour"]


def test_inline_history_without_a_model_uses_the_documented_fallback(client: TestClient) -> None:
    day = np.tile(np.r_[np.full(200, 0.5), np.full(88, 3.0)], 3)  # 3 days: 0.5 cores, busy 3 cores
    r = client.post("/v1/placements", json=request({"history": {"cpu": day.tolist(), "memory_gib": [2.0] * 864}}))
    assert r.status_code == 200, r.text
    w = r.json()["rightsizing"]["workloads"][0]
    assert w["model_version"] is None and w["cpu"]["method"] == "fallback:weekly_median"
    # the days repeat exactly, so the slot median forecast the last day from the ones before without error
    assert w["cpu"]["forecaster"] == "weekly_median" and w["cpu"]["backtest_mae"] == 0.0
    assert w["cpu"]["p95_peak"] >= 3.0  # never below the last day's peak
    assert w["memory_gib"]["forecast"] == pytest.approx(2.0 * 1.2 / 2)
    assert any("fallback" in x for x in w["warnings"])


@pytest.mark.parametrize(
    ("demand", "loc_tail"),
    [
        ({"series": "nobody"}, ["series"]),
        ({"history": {"cpu": [1.0, -1.0]}}, ["cpu", 1]),
        ({"series": "x", "history": {"cpu": [1.0]}}, []),
        ({"history": {"gpu": [1.0]}}, ["gpu", "[key]"]),
    ],
)
def test_bad_demand_is_422(client: TestClient, demand: dict[str, Any], loc_tail: list[Any]) -> None:
    r = client.post("/v1/placements", json=request(demand))
    assert r.status_code == 422, r.text
    locs = [e["loc"] for e in r.json()["errors"]]
    assert any("demand" in loc and loc[-len(loc_tail) :] == loc_tail for loc in locs) if loc_tail else locs


@pytest.mark.both_backends
def test_forecast_endpoint_and_models(client: TestClient) -> None:
    text, _ = usage_csv()
    client.post("/v1/workloads/api/usage", content=text, headers={"content-type": "text/csv"})
    f = client.get("/v1/workloads/api/forecast", params={"horizon": 12}).json()
    assert len(f["p50"]) == 12 and all(u >= m for m, u in zip(f["p50"], f["p95"], strict=True))
    assert f["forecaster"] == "weekly_median" and f["regime_shift"] is False  # no model yet: the baseline
    assert client.get("/v1/workloads/ghost/forecast").status_code == 404
    assert client.get("/v1/forecast/models").json() == {"items": []}
