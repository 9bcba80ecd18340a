from __future__ import annotations

import json

import pytest

from providers import aws
from providers.base import FeedOptions, FeedUnavailable, MalformedResponse
from tests.unit.providers.recorded import FIXTURES, fixture_bytes


def _price_list(name: str) -> list[str]:
    return json.loads((FIXTURES / "aws" / name).read_text())["PriceList"]


def test_parse_price_list_ondemand_and_reserved_all_upfront_rates():
    offers = {
        (o.instance_type, o.capacity_type): o
        for o in aws.parse_price_list(_price_list("get_products_compute_page1.json"), "eu-central-1")
    }
    assert set(offers) == {("m6i.xlarge", "ondemand"), ("m6i.xlarge", "reserved")}
    assert offers["m6i.xlarge", "ondemand"].price_per_hour == pytest.approx(0.23)
    assert offers["m6i.xlarge", "ondemand"].effective_at == "2026-11-01T00:00:00Z"
    # all-upfront fee spread over the term; the convertible no-upfront term is ignored
    assert offers["m6i.xlarge", "reserved"].price_per_hour == pytest.approx(1187 / 8760)
    assert offers["m6i.xlarge", "reserved"].reserved_3yr_per_hour == pytest.approx(2389 / (3 * 8760))
    assert offers["m6i.xlarge", "ondemand"].pool_id == "aws:eu-central-1/m6i.xlarge/ondemand"


def test_parse_price_list_skips_other_regions_and_rejects_garbage():
    assert aws.parse_price_list(_price_list("get_products_compute_page1.json"), "us-east-1") == []
    with pytest.raises(MalformedResponse):
        aws.parse_price_list([json.dumps({"product": {}})], "eu-central-1")


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        # latest record per zone, then the cheapest zone: 1b's newest (0.0745) beats 1a (0.0812);
        # 1b's older, lower 0.0691 no longer applies
        (
            [
                {
                    "InstanceType": "m",
                    "AvailabilityZone": "a",
                    "SpotPrice": "0.0812",
                    "Timestamp": "2026-12-02T09:00:00Z",
                },
                {
                    "InstanceType": "m",
                    "AvailabilityZone": "b",
                    "SpotPrice": "0.0745",
                    "Timestamp": "2026-12-02T08:00:00Z",
                },
                {
                    "InstanceType": "m",
                    "AvailabilityZone": "b",
                    "SpotPrice": "0.0691",
                    "Timestamp": "2026-11-30T08:00:00Z",
                },
            ],
            {"m": 0.0745},
        ),
        ([], {}),
    ],
)
def test_parse_spot_history(items, expected):
    got = {o.instance_type: o.price_per_hour for o in aws.parse_spot_history(items, "eu-central-1")}
    assert got == pytest.approx(expected)


def test_parse_storage_maps_volume_types_to_tiers():
    got = {
        s.tier: (s.usd_per_gb_month, s.product)
        for s in aws.parse_storage(_price_list("get_products_storage.json"), "eu-central-1")
    }
    assert got == {"ssd": (0.0952, "EBS gp3"), "premium": (0.149, "EBS io2"), "standard": (0.054, "EBS st1")}


def _route(seen):
    target = seen.headers.get("X-Amz-Target", "")
    if target == "AWSPriceListService.GetProducts":
        req = seen.json()
        families = {f["Value"] for f in req["Filters"] if f["Field"] == "productFamily"}
        assert {f["Value"] for f in req["Filters"] if f["Field"] == "regionCode"} == {"eu-central-1"}
        if "Storage" in families:
            return 200, "application/x-amz-json-1.1", fixture_bytes("aws/get_products_storage.json")
        page = "page2" if req.get("NextToken") else "page1"
        return 200, "application/x-amz-json-1.1", fixture_bytes(f"aws/get_products_compute_{page}.json")
    action = seen.form.get("Action", [""])[0]
    if action == "DescribeSpotPriceHistory":
        return 200, "text/xml", fixture_bytes("aws/describe_spot_price_history.xml")
    if action == "DescribeInstanceTypes":
        return 200, "text/xml", fixture_bytes("aws/describe_instance_types.xml")
    return 400, "text/plain", b"unexpected request"


@pytest.fixture()
def aws_env(monkeypatch):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def test_fetch_through_boto3_against_a_local_endpoint(feed_server, aws_env):
    feed_server.route = _route
    steps = []
    result = aws.AwsPriceSource(FeedOptions(endpoint=feed_server.url, timeout_s=5)).fetch(
        ["eu-central-1"], progress=lambda what, done, total: steps.append((what, done, total))
    )
    offers = {o.pool_id: o.price_per_hour for o in result.offers}
    assert offers == pytest.approx(
        {
            "aws:eu-central-1/m6i.xlarge/ondemand": 0.23,
            "aws:eu-central-1/m6i.xlarge/reserved": 1187 / 8760,
            "aws:eu-central-1/m7g.large/ondemand": 0.0952,
            "aws:eu-central-1/m7g.large/reserved": 492 / 8760,
            "aws:eu-central-1/m6i.xlarge/spot": 0.0745,
            "aws:eu-central-1/m7g.large/spot": 0.0347,
        }
    )
    assert result.specs["m7g.large"].arch == "arm64"
    assert result.specs["g4dn.xlarge"].gpus == 1 and result.specs["g4dn.xlarge"].gpu_model == "T4"
    assert result.specs["m6i.xlarge"].memory_gib == 16
    # facts for instance requirements: EC2's bare metal and GPU memory, the price list's processor name
    assert result.specs["m6i.xlarge"].processor == "Intel Xeon 8375C (Ice Lake)"
    assert result.specs["m6i.xlarge"].bare_metal is False and result.specs["m7g.large"].bare_metal is None
    assert result.specs["g4dn.xlarge"].gpu_memory_gib == 16
    assert {s.tier for s in result.storage} == {"standard", "ssd", "premium"}
    # paged: the second GetProducts call carried the first page's NextToken
    tokens = [s.json().get("NextToken") for s in feed_server.seen if s.headers.get("X-Amz-Target")]
    assert "eyJwYWdlIjoyfQ==" in tokens
    assert steps[0] == ("aws eu-central-1", 0, 1) and steps[-1] == ("aws", 1, 1)


def test_http_errors_become_feed_unavailable_after_retries(feed_server, aws_env):
    feed_server.route = lambda seen: (
        503,
        "application/x-amz-json-1.1",
        b'{"__type":"ServiceUnavailableException","message":"slow down"}',
    )
    with pytest.raises(FeedUnavailable) as info:
        aws.AwsPriceSource(FeedOptions(endpoint=feed_server.url, attempts=2, timeout_s=5)).fetch(["eu-central-1"])
    assert info.value.provider == "aws" and info.value.region == "eu-central-1"
    assert len(feed_server.seen) == 2  # botocore retried once, then gave up
