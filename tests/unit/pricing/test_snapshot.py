"""Bundled catalog snapshot: prices equal the shared catalogs, arch rule, jurisdictions."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pricing import snapshot
from pricing.snapshot_build import pools as bs

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared reference data not available")


def _pool(site: str, instance_type: str, capacity: str) -> pd.Series:
    p = snapshot.read_pools()
    hit = p[(p["site"] == site) & (p["instance_type"] == instance_type) & (p["capacity_type"] == capacity)]
    assert len(hit) == 1, (site, instance_type, capacity, len(hit))
    return hit.iloc[0]


@pytest.mark.parametrize(
    ("instance_type", "provider", "arch"),
    [
        ("m7g.large", "aws", "arm64"),
        ("m6i.large", "aws", "amd64"),
        ("Standard_D2ps_v5", "azure", "arm64"),
        ("Standard_B2pls_v2", "azure", "arm64"),
        ("Standard_D2s_v5", "azure", "amd64"),
        ("t2a-standard-1", "gcp", "arm64"),
        ("n2-standard-2", "gcp", "amd64"),
    ],
)
def test_arch_rule_on_known_types(instance_type: str, provider: str, arch: str) -> None:
    p = snapshot.read_pools()
    got = set(p.loc[(p["instance_type"] == instance_type) & (p["price_source"] == provider), "arch"])
    assert got == {arch}


@pytest.mark.parametrize(
    ("fn", "arg", "want"),
    [
        (bs.aws_arch, "AWS Graviton3 Processor", "arm64"),
        (bs.aws_arch, "Intel Xeon 8375C (Ice Lake)", "amd64"),
        (bs.azure_arch, "Standard_E4pds_v6", "arm64"),
        (bs.azure_arch, "Standard_NP10s", "amd64"),
        (bs.gcp_arch, "c4a-standard-4", "arm64"),
        (bs.gcp_arch, "c4-standard-4", "amd64"),
    ],
)
def test_arch_functions(fn: object, arg: str, want: str) -> None:
    assert callable(fn)
    assert fn(arg) == want


@pytest.mark.parametrize(
    ("site", "must_have", "must_not_have"),
    [
        ("aws:eu-central-1", {"EU", "EEA", "DE"}, set()),
        ("azure:westeurope", {"EU", "EEA", "NL"}, set()),
        ("gcp:europe-west1", {"EU", "EEA", "BE"}, set()),
        ("azure:norwayeast", {"EEA", "NO"}, {"EU"}),
        ("aws:eu-west-2", {"UK"}, {"EU", "EEA"}),
        ("gcp:europe-west6", {"CH"}, {"EU", "EEA"}),
        ("aws:us-east-1", {"US"}, {"EU", "EEA"}),
        ("aws:eu-central-1-wl1-ber1", {"EU", "EEA", "DE"}, set()),
    ],
)
def test_site_jurisdictions(site: str, must_have: set[str], must_not_have: set[str]) -> None:
    sites = {s["id"]: s for s in snapshot.read_sites()}
    j = set(sites[site]["jurisdictions"])
    assert must_have <= j
    assert not (must_not_have & j)


def test_every_eu_country_site_has_eu_and_eea() -> None:
    eu = {"AT", "BE", "DE", "DK", "ES", "FI", "FR", "IE", "IT", "NL", "PL", "SE"}
    for s in snapshot.read_sites():
        if s["country"] in eu:
            assert {"EU", "EEA"} <= set(s["jurisdictions"]), s["id"]


def test_local_and_wavelength_zones_are_placed_public_sites() -> None:
    sites = {s["id"]: s for s in snapshot.read_sites()}
    bos = sites["aws:us-east-1-bos-1"]
    assert (bos["kind"], bos["country"]) == ("public", "US")
    assert "Local Zone" in bos["name"]
    # the contract: an edge or private site is `<kind>:<name>`, owned nodes; no public zone is one
    assert all(s["id"].startswith(f"{s['kind']}:") for s in sites.values() if s["kind"] != "public")
    assert abs(bos["lat"] - 42.36) < 0.1
    assert sites["aws:eu-west-3-wl1-cmn1"]["country"] == "MA"
    assert "aws:us-east-1-wl1" not in sites


def test_pools_unique_and_positive() -> None:
    p = snapshot.read_pools()
    assert not p.duplicated(["site", "instance_type", "capacity_type"]).any()
    assert (p["price_per_hour"] > 0).all()
    assert set(p["site"].unique()) <= {s["id"] for s in snapshot.read_sites()}
    assert p["price_per_hour"].dtype == "float64"


def test_latency_symmetric_no_self_pairs() -> None:
    lat = snapshot.read_latency()
    assert not (lat["src"].astype(str) == lat["dst"].astype(str)).any()
    fwd = {(str(a), str(b)): v for a, b, v in zip(lat["src"], lat["dst"], lat["rtt_ms"], strict=True)}
    assert all(fwd[(b, a)] == v for (a, b), v in fwd.items())


def test_internet_egress_has_a_default_per_provider() -> None:
    # the catalog prices a region the table does not list at its provider's "<provider>:*" row
    table = snapshot.read_internet_egress()
    assert all(table[f"{p}:*"] > 0 for p in ("aws", "azure", "gcp"))


# ----------------------------------------------------------------- against the shared catalogs


@needs_shared
@pytest.mark.parametrize(
    ("region", "instance_type"),
    [
        ("us-east-1", "m6i.large"),
        ("eu-central-1", "m7g.large"),
        ("ap-south-1", "a1.2xlarge"),
        ("us-west-2", "p4d.24xlarge"),
        ("us-east-1-bos-1", "c5d.2xlarge"),
    ],
)
def test_aws_prices_match_catalog(region: str, instance_type: str) -> None:
    df = pd.read_csv(SHARED / "pricing" / "aws_ec2_linux_prices.csv", dtype=str, keep_default_na=False)
    row = df[(df["region"] == region) & (df["instance_type"] == instance_type)]
    if row.empty:
        pytest.skip("type not offered there in this catalog")
    r = row.iloc[0]
    site = f"aws:{region}"
    assert _pool(site, instance_type, "ondemand")["price_per_hour"] == float(r["price_ondemand_usd_hr"])
    if r["price_spot_avg_usd_hr"] and float(r["price_spot_avg_usd_hr"]) > 0:
        assert _pool(site, instance_type, "spot")["price_per_hour"] == float(r["price_spot_avg_usd_hr"])
    if r["price_reserved_1yr_allupfront_usd_hr"] and float(r["price_reserved_1yr_allupfront_usd_hr"]) > 0:
        res = _pool(site, instance_type, "reserved")
        assert res["price_per_hour"] == float(r["price_reserved_1yr_allupfront_usd_hr"])
        assert res["reserved_3yr_per_hour"] == float(r["price_reserved_3yr_allupfront_usd_hr"])


@needs_shared
def test_aws_random_sample_matches_catalog() -> None:
    df = pd.read_csv(SHARED / "pricing" / "aws_ec2_linux_prices.csv", dtype=str, keep_default_na=False)
    p = snapshot.read_pools()
    idx = p.set_index(["site", "instance_type", "capacity_type"])["price_per_hour"]
    sites = {s["id"] for s in snapshot.read_sites()}
    sample = df[("aws:" + df["region"]).isin(sites)].sample(200, random_state=7)
    for r in sample.itertuples(index=False):
        assert idx[(f"aws:{r.region}", r.instance_type, "ondemand")] == float(r.price_ondemand_usd_hr)


@needs_shared
def test_azure_random_sample_matches_catalog() -> None:
    df = pd.read_csv(SHARED / "pricing" / "azure_vms.csv", dtype=str, keep_default_na=False)
    p = snapshot.read_pools()
    idx = p.set_index(["site", "instance_type", "capacity_type"])["price_per_hour"]
    for r in df.sample(200, random_state=11).itertuples(index=False):
        assert idx[(f"azure:{r.Region}", r.InstanceType, "ondemand")] == float(r.Price)
        if r.SpotPrice and float(r.SpotPrice) > 0:
            assert idx[(f"azure:{r.Region}", r.InstanceType, "spot")] == float(r.SpotPrice)


@needs_shared
def test_gcp_matches_normalized_table() -> None:
    df = pd.read_csv(SHARED / "pricing" / "vm_prices_normalized.csv", dtype=str, keep_default_na=False)
    df = df[(df["provider"] == "gcp") & ~df["instance_type"].str.match(r"^(a2|a3|a4|g2)-")]
    df = df[df["region"] != "us-central2"]
    p = snapshot.read_pools()
    idx = p.set_index(["site", "instance_type", "capacity_type"])["price_per_hour"]
    for r in df.sample(200, random_state=3).itertuples(index=False):
        assert idx[(f"gcp:{r.region}", r.instance_type, "ondemand")] == float(r.price_ondemand_usd_hr)
        if r.price_spot_usd_hr and float(r.price_spot_usd_hr) > 0:
            assert idx[(f"gcp:{r.region}", r.instance_type, "spot")] == float(r.price_spot_usd_hr)


@needs_shared
@pytest.mark.parametrize(
    ("instance_type", "accel", "count"),
    [
        ("a2-highgpu-1g", "A100", 1),
        ("a2-megagpu-16g", "A100", 16),
        ("g2-standard-24", "L4", 2),
        ("g2-standard-96", "L4", 8),
        ("a3-highgpu-8g", "H100", 8),
    ],
)
def test_gcp_gpu_host_plus_accelerator(instance_type: str, accel: str, count: int) -> None:
    from decimal import Decimal

    df = pd.read_csv(SHARED / "pricing" / "gcp_vms.csv", dtype=str, keep_default_na=False)
    host = df[(df["InstanceType"] == instance_type) & (df["Region"] == "us-central1")].iloc[0]
    acc = df[
        (df["InstanceType"] == "")
        & (df["AcceleratorName"] == accel)
        & (df["AcceleratorCount"] == str(count))
        & (df["AvailabilityZone"] == host["AvailabilityZone"])
    ]
    want = Decimal(host["Price"]) + Decimal(acc.iloc[0]["Price"])
    got = _pool("gcp:us-central1", instance_type, "ondemand")
    assert got["price_per_hour"] == float(want)
    assert (got["gpus"], got["gpu_model"]) == (count, accel)


@needs_shared
def test_no_tpu_rows() -> None:
    p = snapshot.read_pools()
    assert not p["instance_type"].astype(str).str.startswith("tpu").any()
    assert not p["instance_type"].astype(str).eq("").any()


@pytest.mark.parametrize(
    ("instance_type", "want"),
    [
        ("a2-highgpu-4g", ("A100", 4)),
        ("a2-megagpu-16g", ("A100", 16)),
        ("a2-ultragpu-2g", ("A100-80GB", 2)),
        ("a3-highgpu-8g", ("H100", 8)),
        ("a3-megagpu-8g", ("H100-MEGA", 8)),
        ("g2-standard-48", ("L4", 4)),
        ("g2-standard-2", None),
        ("n2-standard-8", None),
    ],
)
def test_gcp_host_only_accelerators(instance_type: str, want: tuple[str, int] | None) -> None:
    assert bs.gcp_accelerator_for(instance_type) == want
