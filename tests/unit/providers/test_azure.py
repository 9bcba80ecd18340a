from __future__ import annotations

import pytest

from providers import azure
from providers.base import FeedOptions, FeedUnavailable
from tests.unit.providers.recorded import fixture_bytes, fixture_json


def _items(*names):
    return [i for n in names for i in fixture_json(f"azure/{n}")["Items"]]


def test_parse_retail_prices_linux_ondemand_spot_and_reserved():
    offers = {
        o.pool_id: o
        for o in azure.parse_retail_prices(_items("retail_vms_page1.json", "retail_vms_page2.json"), "westeurope")
    }
    assert {k: o.price_per_hour for k, o in offers.items()} == pytest.approx(
        {
            "azure:westeurope/Standard_D4s_v5/ondemand": 0.23,  # the Windows meter is not the Linux price
            "azure:westeurope/Standard_D4s_v5/spot": 0.0461,  # Low Priority is not spot
            "azure:westeurope/Standard_D4s_v5/reserved": 1187.0 / 8760,  # whole-term price per hour
            "azure:westeurope/Standard_D4ps_v5/ondemand": 0.184,
            "azure:westeurope/Standard_D4ps_v5/spot": 0.0368,
        }
    )
    assert offers["azure:westeurope/Standard_D4s_v5/reserved"].reserved_3yr_per_hour == pytest.approx(
        2276.0 / (3 * 8760)
    )


def test_parse_disks_per_gb_month_from_128_gib_disks():
    got = {s.tier: s.usd_per_gb_month for s in azure.parse_disk_prices(_items("retail_disks.json"), "westeurope")}
    per_gb = 128 * 1.073741824
    assert got == pytest.approx({"premium": 21.68 / per_gb, "ssd": 10.24 / per_gb, "standard": 6.14 / per_gb})


def test_parse_resource_skus_specs_arch_gpus_restrictions():
    specs = azure.parse_resource_skus(fixture_json("azure/resource_skus.json")["value"])
    assert set(specs) == {"Standard_D4s_v5", "Standard_D4ps_v5", "Standard_NC4as_T4_v3"}  # disks skipped
    assert specs["Standard_D4ps_v5"].arch == "arm64"
    assert specs["Standard_NC4as_T4_v3"].gpus == 1
    assert specs["Standard_NC4as_T4_v3"].restricted_regions == {"westeurope"}
    assert specs["Standard_D4s_v5"].memory_gib == 16


def test_fetch_follows_next_page_link_with_the_filter(feed_server):
    def route(seen):
        flt = seen.query.get("$filter", [""])[0]
        if "$skip" in str(seen.query):
            return 200, "application/json", fixture_bytes("azure/retail_vms_page2.json", feed_server.url)
        if "serviceName eq 'Storage'" in flt:
            return 200, "application/json", fixture_bytes("azure/retail_disks.json", feed_server.url)
        assert "armRegionName eq 'westeurope'" in flt
        return 200, "application/json", fixture_bytes("azure/retail_vms_page1.json", feed_server.url)

    feed_server.route = route
    result = azure.AzurePriceSource(FeedOptions(endpoint=feed_server.url, timeout_s=5)).fetch(["westeurope"])
    assert len(result.offers) == 5
    assert {s.tier for s in result.storage} == {"standard", "ssd", "premium"}
    assert feed_server.seen[0].query.get("api-version") == ["2023-01-01-preview"]
    assert len(feed_server.seen) == 3  # two VM pages, one disk page


def test_fetch_retries_transient_errors_then_succeeds(feed_server):
    calls = []

    def route(seen):
        calls.append(seen)
        if len(calls) == 1:
            return 503, "application/json", b'{"error": "busy"}'
        return 200, "application/json", b'{"Items": [], "NextPageLink": null}'

    feed_server.route = route
    azure.AzurePriceSource(FeedOptions(endpoint=feed_server.url, backoff_s=0.01)).fetch(["westeurope"])
    assert len(calls) == 3  # 503, then the VM page, then the disk page


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, b"oops"),
        (400, b'{"Error": {"Message": "Invalid OData filter"}}'),
        (200, b'{"unexpected": true}'),
        (200, b"<html>"),
    ],
)
def test_fetch_errors_become_feed_unavailable(feed_server, status, body):
    feed_server.route = lambda seen: (status, "application/json", body)
    with pytest.raises(FeedUnavailable) as info:
        azure.AzurePriceSource(FeedOptions(endpoint=feed_server.url, attempts=2, backoff_s=0.01)).fetch(["westeurope"])
    assert info.value.provider == "azure" and info.value.region == "westeurope"


def test_resource_skus_through_azure_mgmt_compute_against_a_local_endpoint(feed_server):
    from azure.core.credentials import AccessToken

    class StaticToken:
        def get_token(self, *scopes, **kw):
            return AccessToken("test-token", 4_102_444_800)

    feed_server.route = lambda seen: (200, "application/json", fixture_bytes("azure/resource_skus.json"))
    src = azure.AzurePriceSource(
        FeedOptions(timeout_s=5),
        subscription_id="00000000-0000-0000-0000-000000000000",
        credential=StaticToken(),
        management_endpoint=feed_server.url,
    )
    try:
        specs = src._resource_skus(["westeurope"])
    except FeedUnavailable as exc:  # azure-core refuses bearer tokens over plain http
        pytest.fail(f"resource SKUs over the local endpoint failed: {exc}")
    assert specs["Standard_D4ps_v5"].arch == "arm64"
    (req,) = feed_server.seen
    assert req.path.endswith("/providers/Microsoft.Compute/skus")
    assert req.headers["Authorization"] == "Bearer test-token"


def _sku(name: str, caps: dict[str, str]) -> dict[str, object]:
    return {
        "resourceType": "virtualMachines",
        "name": name,
        "capabilities": [{"name": k, "value": v} for k, v in caps.items()],
        "restrictions": [],
    }


@pytest.mark.parametrize(
    ("name", "caps", "vcpus"),
    [
        # the resource SKU lists the parent's cores in vCPUs and the active ones in vCPUsAvailable
        ("Standard_E16-4as_v5", {"vCPUs": "16", "vCPUsAvailable": "4", "MemoryGB": "128"}, 4),
        ("Standard_HB120-16rs_v2", {"vCPUs": "120", "vCPUsAvailable": "16", "MemoryGB": "456"}, 16),
        # without vCPUsAvailable, the name says it
        ("Standard_M64-16ms", {"vCPUs": "64", "MemoryGB": "1792"}, 16),
        ("Standard_DS13-2_v2", {"vCPUs": "8", "MemoryGB": "56"}, 2),
        ("Standard_D4s_v5", {"vCPUs": "4", "MemoryGB": "16"}, 4),
    ],
)
def test_constrained_vcpu_sizes_run_their_active_vcpus(name, caps, vcpus):
    spec = azure.parse_resource_skus([_sku(name, caps)])[name]
    assert spec.vcpus == vcpus
    assert spec.memory_gib == float(caps["MemoryGB"])  # the parent's memory
