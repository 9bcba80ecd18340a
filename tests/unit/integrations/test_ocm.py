"""OCM AddOnPlacementScores from the broker's prices: per-core prices and their scaling to -100..100."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from broker.core.domain import CapacityType
from broker.integrations import ocm
from tests.unit.integrations.small_catalog import POOLS, pool, table

TABLE = table()


def test_core_price_is_the_cheapest_core_with_its_memory_on_general_purpose_pools() -> None:
    sites = ["aws:eu-central-1", "azure:westeurope", "gcp:europe-west3", "nowhere:x"]
    got = ocm.core_prices(TABLE, sites, CapacityType.ONDEMAND)
    for site in sites[:3]:
        expected = min(
            p.price_per_hour / min(p.vcpus, p.memory_gib // 4)
            for p in POOLS
            if p.site == site and p.capacity_type is CapacityType.ONDEMAND and p.gpus == 0 and p.arch == "amd64"
        )
        assert got[site] == pytest.approx(expected)
    assert got["aws:eu-central-1"] == pytest.approx(0.045)  # m.2xlarge: 0.36 / 8, not the GPU pool
    assert got["gcp:europe-west3"] == pytest.approx(0.06)  # n.large: 0.12 / 2, not the cheaper Arm pool
    assert "nowhere:x" not in got
    # a burstable nano (2 vCPU, 0.5 GiB) has the cheapest vCPU but holds no core with its memory
    nano = table((*POOLS, pool("aws:eu-central-1", "t.nano", 2, 0.5, 0.005)))
    assert ocm.core_prices(nano, sites, CapacityType.ONDEMAND)["aws:eu-central-1"] == pytest.approx(0.045)
    spot = ocm.core_prices(TABLE, sites, CapacityType.SPOT)
    assert set(spot) == {"aws:eu-central-1", "azure:westeurope"}  # gcp sells no spot here


def test_the_cheapest_scores_100_the_dearest_minus_100_linear_between() -> None:
    scores = ocm.scale({"a": 0.02, "b": 0.05, "c": 0.03, "d": 0.045})
    assert scores["a"] == 100 and scores["b"] == -100
    assert scores["c"] == round(100 - 200 * (0.01 / 0.03))
    assert scores["d"] == -67  # 100 - 200 * 0.025 / 0.03 = -66.7


@pytest.mark.parametrize("prices", [{"only": 0.04}, {"a": 0.04, "b": 0.04}, {}])
def test_no_spread_means_no_preference(prices: dict[str, float]) -> None:
    assert ocm.scale(prices) == dict.fromkeys(prices, 0)


def test_scores_stay_in_range_and_keep_the_price_order() -> None:
    rng = random.Random(4)
    for _ in range(200):
        prices = {f"c{i}": rng.uniform(0.001, 0.2) for i in range(rng.randint(2, 12))}
        scores = ocm.scale(prices)
        assert all(-100 <= v <= 100 for v in scores.values())
        by_price = sorted(prices, key=prices.__getitem__)
        assert [scores[c] for c in by_price] == sorted(scores.values(), reverse=True)


def test_each_cluster_gets_the_scores_its_site_has_and_a_note_when_none() -> None:
    sites = {"fra": "aws:eu-central-1", "ams": "azure:westeurope", "fra-gcp": "gcp:europe-west3", "x": "nowhere:x"}
    per_cluster, notes = ocm.scores(TABLE, sites)
    assert set(per_cluster) == {"fra", "ams", "fra-gcp"}
    assert {s["name"] for s in per_cluster["fra-gcp"]} == {"costPerCore"}
    # on-demand per core: ams 0.045 (0.09 / 2) = fra 0.045 (0.36 / 8) < fra-gcp 0.06; spot: ams 0.01 < fra 0.015
    assert per_cluster["ams"] == [{"name": "costPerCore", "value": 100}, {"name": "spotCostPerCore", "value": 100}]
    assert per_cluster["fra"] == [{"name": "costPerCore", "value": 100}, {"name": "spotCostPerCore", "value": -100}]
    assert per_cluster["fra-gcp"] == [{"name": "costPerCore", "value": -100}]
    assert notes == ["x: site nowhere:x is not in the catalog"]


def test_the_object_and_its_status() -> None:
    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    obj, status = ocm.placement_score(
        "fra",
        "aws:eu-central-1",
        [{"name": "costPerCore", "value": 40}],
        {"costPerCore": 0.045},
        published_at=now,
        valid_until=now + timedelta(hours=1),
    )
    assert obj["metadata"]["namespace"] == "fra" and obj["metadata"]["name"] == ocm.RESOURCE_NAME
    assert obj["metadata"]["annotations"]["placement-broker.dev/costPerCore-usd-per-hour"] == "0.045000"
    assert "status" not in obj
    assert status["validUntil"] == "2026-05-01T13:00:00Z"
    assert status["scores"] == [{"name": "costPerCore", "value": 40}]
