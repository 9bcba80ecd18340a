from __future__ import annotations

import pytest

from providers import gcp
from providers.base import FeedOptions, FeedUnavailable
from tests.unit.providers.recorded import fixture_bytes, fixture_json

REGIONS = ["europe-west1"]


def _skus():
    return [*fixture_json("gcp/list_skus_page1.json")["skus"], *fixture_json("gcp/list_skus_page2.json")["skus"]]


def test_parse_skus_core_and_ram_rates_per_family_and_capacity():
    rates = {k: v[0] for k, v in gcp.parse_skus(_skus(), REGIONS).items()}
    assert rates == pytest.approx(
        {
            ("europe-west1", "n2", "ondemand", "core"): 0.034773,
            ("europe-west1", "n2", "ondemand", "ram"): 0.004661,
            ("europe-west1", "n2", "spot", "core"): 0.008359,
            ("europe-west1", "n2", "spot", "ram"): 0.00112,
            ("europe-west1", "t2a", "ondemand", "core"): 0.0338,
            ("europe-west1", "t2a", "ondemand", "ram"): 0.004533,
        }
    )  # commitments and other regions are not on-demand/spot rates here


def test_machine_types_priced_from_rates_shared_core_skipped():
    specs = gcp.parse_machine_types(
        [
            m
            for scope in fixture_json("gcp/machine_types_aggregated.json")["items"].values()
            for m in scope.get("machineTypes", [])
        ]
    )
    assert ("europe-west1", "e2-micro") not in specs
    assert specs[("europe-west1", "t2a-standard-2")].arch == "arm64"
    offers = {o.pool_id: o.price_per_hour for o in gcp.price_machine_types(gcp.parse_skus(_skus(), REGIONS), specs)}
    assert offers == pytest.approx(
        {
            "gcp:europe-west1/n2-standard-4/ondemand": 4 * 0.034773 + 16 * 0.004661,
            "gcp:europe-west1/n2-standard-4/spot": 4 * 0.008359 + 16 * 0.00112,
            "gcp:europe-west1/t2a-standard-2/ondemand": 2 * 0.0338 + 8 * 0.004533,
        },
        abs=1e-6,
    )


def test_storage_skus_per_gb_month():
    got = {s.tier: (s.usd_per_gb_month, s.product) for s in gcp.parse_storage_skus(_skus(), REGIONS)}
    assert got["premium"][1] == "pd-ssd"
    assert got["ssd"][0] == pytest.approx(0.11 / 1.073741824)
    assert set(got) == {"standard", "ssd", "premium"}


def _route(seen):
    if seen.path == "/v1/services/6F81-5844-456A/skus":
        page = "page2" if seen.query.get("pageToken") else "page1"
        return 200, "application/json", fixture_bytes(f"gcp/list_skus_{page}.json")
    if seen.path == "/compute/v1/projects/demo/aggregated/machineTypes":
        return 200, "application/json", fixture_bytes("gcp/machine_types_aggregated.json")
    return 404, "application/json", b'{"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}'


def test_fetch_through_google_clients_over_rest_against_a_local_endpoint(feed_server):
    from google.auth.credentials import AnonymousCredentials

    feed_server.route = _route
    src = gcp.GcpPriceSource(
        FeedOptions(endpoint=feed_server.url, timeout_s=5), project="demo", credentials=AnonymousCredentials()
    )
    result = src.fetch(REGIONS)
    assert {o.pool_id for o in result.offers} == {
        "gcp:europe-west1/n2-standard-4/ondemand",
        "gcp:europe-west1/n2-standard-4/spot",
        "gcp:europe-west1/t2a-standard-2/ondemand",
    }
    assert len(result.storage) == 3
    assert [s.query.get("pageToken") for s in feed_server.seen if "skus" in s.path] == [
        None,
        ["CiQ2RjgxLTU4NDQtNDU2QQ"],
    ]


def test_fetch_error_becomes_feed_unavailable(feed_server):
    from google.auth.credentials import AnonymousCredentials

    feed_server.route = lambda seen: (
        403,
        "application/json",
        b'{"error": {"code": 403, "message": "Billing API disabled", "status": "PERMISSION_DENIED"}}',
    )
    src = gcp.GcpPriceSource(FeedOptions(endpoint=feed_server.url, timeout_s=5), credentials=AnonymousCredentials())
    with pytest.raises(FeedUnavailable, match="Billing API disabled"):
        src.fetch(REGIONS)
