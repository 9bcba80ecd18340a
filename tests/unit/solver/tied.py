"""Tiny catalogs of equally priced pools, to pin which one a tie goes to (table order)."""

from __future__ import annotations

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind
from broker.core.pooltable import PoolTable, build_pool_table

SITES = [
    Site("aws:eu-central-1", "aws", SiteKind.PUBLIC, "eu-central-1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7),
    Site("gcp:europe-west3", "gcp", SiteKind.PUBLIC, "europe-west3", "DE", ("EU", "EEA", "DE"), 50.1, 8.7),
    Site("azure:germanywestcentral", "azure", SiteKind.PUBLIC, "germanywestcentral", "DE", ("EU", "EEA", "DE"),
         50.1, 8.7),
]  # fmt: skip


def tied_table(pools: list[tuple[int, str, CapacityType, float, int | None]]) -> PoolTable:
    """Pools of 2 vCPUs and 4 GiB, in the order given: (site index, name, capacity type, price,
    max nodes)."""
    out = []
    for s, name, cap, price, max_nodes in pools:
        site = SITES[s]
        pool_id = Pool.make_id(site.id, name, cap)
        out.append(
            Pool(pool_id, site.id, name, cap, Arch.AMD64, 2, 4, 0, None, price, max_nodes, site.provider, "2026-01-01")
        )
    return build_pool_table(SITES, out)
