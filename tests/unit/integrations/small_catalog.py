"""A hand-made catalog of five sites for the Kueue and OCM tests: few enough pools that the
expected prices can be worked out by hand or by a plain loop."""

from __future__ import annotations

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind
from broker.core.pooltable import PoolTable, build_pool_table


def _site(sid: str, country: str, *juris: str) -> Site:
    provider, _, region = sid.partition(":")
    return Site(sid, provider, SiteKind.PUBLIC, region, country, (*juris, country), None, None)


SITES = (
    _site("aws:eu-central-1", "DE", "EU", "EEA"),
    _site("azure:westeurope", "NL", "EU", "EEA"),
    _site("gcp:europe-west3", "DE", "EU", "EEA"),
    _site("aws:us-east-1", "US"),
    _site("aws:eu-west-2", "GB", "UK"),
)
SITE_BY_ID = {s.id: s for s in SITES}


def pool(
    site: str,
    itype: str,
    vcpus: float,
    mem: float,
    price: float,
    cap: CapacityType = CapacityType.ONDEMAND,
    *,
    gpus: float = 0.0,
    arch: Arch = Arch.AMD64,
    max_nodes: int | None = None,
) -> Pool:
    return Pool(
        Pool.make_id(site, itype, cap),
        site,
        itype,
        cap,
        arch,
        vcpus,
        mem,
        gpus,
        "a100" if gpus else None,
        price,
        max_nodes,
        "test",
        "2026-01-01",
    )


POOLS = (
    pool("aws:eu-central-1", "m.large", 2, 8, 0.10),
    pool("aws:eu-central-1", "m.2xlarge", 8, 32, 0.36),
    pool("aws:eu-central-1", "m.large", 2, 8, 0.03, CapacityType.SPOT),
    pool("aws:eu-central-1", "g.xlarge", 8, 64, 3.00, gpus=1),
    pool("azure:westeurope", "d.large", 2, 8, 0.09),
    pool("azure:westeurope", "d.4xlarge", 16, 64, 0.80),
    pool("azure:westeurope", "d.large", 2, 8, 0.02, CapacityType.SPOT),
    pool("gcp:europe-west3", "n.large", 2, 8, 0.12),
    pool("gcp:europe-west3", "n.arm", 4, 16, 0.11, arch=Arch.ARM64),
    pool("gcp:europe-west3", "a.gpu", 12, 85, 3.60, gpus=1),
    pool("aws:us-east-1", "m.large", 2, 8, 0.08),
    pool("aws:us-east-1", "m.2xlarge", 8, 32, 0.30),
    pool("aws:us-east-1", "m.large", 2, 8, 0.025, CapacityType.SPOT),
    pool("aws:eu-west-2", "m.large", 2, 8, 0.11),
    pool("aws:eu-west-2", "r.large", 2, 16, 0.05, CapacityType.RESERVED, max_nodes=2),
)


def table(pools: tuple[Pool, ...] = POOLS) -> PoolTable:
    return build_pool_table(SITES, pools)
