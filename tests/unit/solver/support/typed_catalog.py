"""A small catalog of real instance-type names (so family, generation, CPU maker and GPU name are
derived as on the public catalog), for the instance-requirement tests. Prices are list-price-like;
on us-east-1 every m7i pool is dominated (an m6i as large is cheaper)."""

from __future__ import annotations

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind
from broker.core.instance_attributes import InstanceFacts
from broker.core.pooltable import PoolTable, build_pool_table

SITES = [
    Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0, 400.0),
    Site("azure:eastus", "azure", SiteKind.PUBLIC, "eastus", "US", ("US",), 37.4, -79.0, 350.0),
    Site("gcp:us-central1", "gcp", SiteKind.PUBLIC, "us-central1", "US", ("US",), 41.2, -95.8, 450.0),
    Site("private:fra-dc1", "private", SiteKind.PRIVATE, "fra-dc1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7, 300.0),
    Site("aws:us-east-1-bos-1", "aws", SiteKind.PUBLIC, "us-east-1-bos-1", "US", ("US",), 42.4, -71.1),
]
A, R = Arch.AMD64, Arch.ARM64
SHAPES = [  # site, type, arch, vcpus, GiB, gpus, gpu model, on-demand price
    ("aws:us-east-1", "m7i.large", A, 2, 8, 0, None, 0.1008),
    ("aws:us-east-1", "m7i.xlarge", A, 4, 16, 0, None, 0.2016),
    ("aws:us-east-1", "m7a.large", A, 2, 8, 0, None, 0.11592),
    ("aws:us-east-1", "m6i.large", A, 2, 8, 0, None, 0.096),
    ("aws:us-east-1", "m6i.xlarge", A, 4, 16, 0, None, 0.192),
    ("aws:us-east-1", "m5.large", A, 2, 8, 0, None, 0.096),
    ("aws:us-east-1", "c7g.xlarge", R, 4, 8, 0, None, 0.145),
    ("aws:us-east-1", "g5.xlarge", A, 4, 16, 1, "NVIDIA A10G", 1.006),
    ("azure:eastus", "Standard_D2as_v5", A, 2, 8, 0, None, 0.086),
    ("azure:eastus", "Standard_D4s_v5", A, 4, 16, 0, None, 0.192),
    ("azure:eastus", "Standard_NC24ads_A100_v4", A, 24, 220, 1, "A100-80GB", 3.673),
    ("gcp:us-central1", "n2-standard-2", A, 2, 8, 0, None, 0.0971),
    ("gcp:us-central1", "n2d-standard-4", A, 4, 16, 0, None, 0.169),
    ("gcp:us-central1", "c4a-standard-4", R, 4, 16, 0, None, 0.18),
    ("aws:us-east-1-bos-1", "m5.2xlarge", A, 8, 32, 0, None, 0.48),
]
FACTS = {
    ("aws", "m7i.large"): InstanceFacts("Intel Xeon Scalable (Sapphire Rapids)", None, False),
    ("aws", "m7i.xlarge"): InstanceFacts("Intel Xeon Scalable (Sapphire Rapids)", None, False),
    ("aws", "m7a.large"): InstanceFacts("AMD EPYC 9R14 Processor", None, False),
    ("aws", "c7g.xlarge"): InstanceFacts("AWS Graviton3 Processor", None, False),
    ("aws", "g5.xlarge"): InstanceFacts("AMD EPYC 7R32", 24.0, False),
}


def typed_pools() -> list[Pool]:
    out = []
    for site, it, arch, v, m, g, gm, price in SHAPES:
        for cap, f in ((CapacityType.ONDEMAND, 1.0), (CapacityType.SPOT, 0.35)):
            out.append(
                Pool(Pool.make_id(site, it, cap), site, it, cap, arch, v, m, g, gm, round(price * f, 6), None,
                     site.split(":")[0], "2026-01-01")
            )  # fmt: skip
    out.append(
        Pool(Pool.make_id("private:fra-dc1", "r740", CapacityType.RESERVED), "private:fra-dc1", "r740",
             CapacityType.RESERVED, A, 48, 384, 0, None, 0.9, 3, "tco-model", "2026-01-01")
    )  # fmt: skip
    return out


def typed_table() -> PoolTable:
    return build_pool_table(SITES, typed_pools(), FACTS)
