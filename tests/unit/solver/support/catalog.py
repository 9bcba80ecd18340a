"""The solver tests' one synthetic catalog: five sites, a few shapes, on-demand and spot pools
(reserved ones on request), one owned site with a few big nodes. Fast to solve, and small enough
for the full model's MIP to be solved to optimality.

`tied_table` builds tiny catalogs of equally priced pools, to pin which one a tie goes to.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from broker.core.domain import (
    Arch,
    CapacityType,
    PlacementRequest,
    Pool,
    ResidencyPolicy,
    Site,
    SiteKind,
    UserRegion,
    Workload,
)
from broker.core.pooltable import PoolTable, build_pool_table
from broker.solver import PlacementProblem

SITES = [
    Site("aws:eu-central-1", "aws", SiteKind.PUBLIC, "eu-central-1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7, 380.0),
    Site("gcp:europe-west1", "gcp", SiteKind.PUBLIC, "europe-west1", "BE", ("EU", "EEA", "BE"), 50.4, 3.8, 120.0),
    Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0, 400.0),
    Site("azure:eastus", "azure", SiteKind.PUBLIC, "eastus", "US", ("US",), 37.4, -79.0, 350.0),
    Site("private:fra-dc1", "private", SiteKind.PRIVATE, "fra-dc1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7, 300.0),
]
GDPR = ResidencyPolicy("gdpr-eu", allowed_jurisdictions=frozenset({"EEA"}))
US_ONLY = ResidencyPolicy("us-only", allowed_countries=frozenset({"US"}))
SPOT_OK = (CapacityType.ONDEMAND, CapacityType.SPOT)
SHAPES = [  # type, vcpus, GiB, gpus, arch, on-demand price
    ("small", 2, 4, 0, Arch.AMD64, 0.08),
    ("medium", 4, 16, 0, Arch.AMD64, 0.19),
    ("large", 16, 64, 0, Arch.AMD64, 0.70),
    ("highmem", 4, 32, 0, Arch.AMD64, 0.26),
    ("arm", 4, 8, 0, Arch.ARM64, 0.12),
    ("gpu", 8, 32, 1, Arch.AMD64, 1.10),
]
SITE_FACTOR = {"aws:eu-central-1": 1.1, "gcp:europe-west1": 1.0, "aws:us-east-1": 0.9, "azure:eastus": 0.95}
# price factors of the capacity types against on-demand
SPOT_FACTOR, RESERVED_FACTOR = 0.35, 0.6


def pools(owned_nodes: int = 3, *, reserved: bool = False, owned_price: float = 0.9) -> list[Pool]:
    """Every shape at every public site, on demand and spot (and reserved), then the owned
    site's `owned_nodes` nodes of 48 vCPUs and 384 GiB at `owned_price` each."""
    kinds = [(CapacityType.ONDEMAND, 1.0), (CapacityType.SPOT, SPOT_FACTOR)]
    if reserved:
        kinds.append((CapacityType.RESERVED, RESERVED_FACTOR))
    out = []
    for s in SITES[:4]:
        for name, v, m, g, arch, price in SHAPES:
            base = round(price * SITE_FACTOR[s.id], 6)
            for cap, f in kinds:
                out.append(
                    Pool(
                        Pool.make_id(s.id, name, cap),
                        s.id,
                        name,
                        cap,
                        arch,
                        v,
                        m,
                        g,
                        "T4" if g else None,
                        round(base * f, 6),
                        None,
                        s.provider,
                        "2026-01-01",
                    )
                )
    dc = SITES[4]
    out.append(
        Pool(
            Pool.make_id(dc.id, "r740", CapacityType.RESERVED),
            dc.id,
            "r740",
            CapacityType.RESERVED,
            Arch.AMD64,
            48,
            384,
            0,
            None,
            owned_price,
            owned_nodes,
            "tco-model",
            "2026-01-01",
        )
    )
    return out


def table(owned_nodes: int = 3, *, reserved: bool = False, owned_price: float = 0.9) -> PoolTable:
    return build_pool_table(SITES, pools(owned_nodes, reserved=reserved, owned_price=owned_price))


def problem(
    workloads: Sequence[Workload],
    *,
    tbl: PoolTable | None = None,
    regions: tuple[UserRegion, ...] = (),
    rtt: dict[str, list[float]] | None = None,
    objective: object | None = None,
    time_limit_s: float | None = None,
) -> PlacementProblem:
    """A request of `workloads` over the catalog (or `tbl`): egress 0.02 $/GB between sites,
    0.09 to the internet; block storage 0.045 / 0.08 / 0.125 $/GB-month by tier."""
    t = tbl or table()
    n = t.n_sites
    egress = np.full((n, n), 0.02)
    np.fill_diagonal(egress, 0.0)
    storage = np.tile(np.array([[0.045, 0.08, 0.125]]), (n, 1))
    kwargs: dict[str, object] = {}
    if objective is not None:
        kwargs["objective"] = objective
    if time_limit_s is not None:
        kwargs["time_limit_s"] = time_limit_s
    req = PlacementRequest(name="t", workloads=tuple(workloads), user_regions=regions, **kwargs)  # type: ignore[arg-type]
    return PlacementProblem(
        request=req,
        table=t,
        user_rtt={k: np.array(v, dtype=float) for k, v in (rtt or {}).items()},
        egress_usd_per_gb=egress,
        internet_egress_usd_per_gb=np.full(n, 0.09),
        storage_usd_per_gb_month=storage,
    )


TIED_SITES = [
    Site("aws:eu-central-1", "aws", SiteKind.PUBLIC, "eu-central-1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7),
    Site("gcp:europe-west3", "gcp", SiteKind.PUBLIC, "europe-west3", "DE", ("EU", "EEA", "DE"), 50.1, 8.7),
    Site("azure:germanywestcentral", "azure", SiteKind.PUBLIC, "germanywestcentral", "DE", ("EU", "EEA", "DE"),
         50.1, 8.7),
]  # fmt: skip


def tied_table(tied: list[tuple[int, str, CapacityType, float, int | None]]) -> PoolTable:
    """Pools of 2 vCPUs and 4 GiB at three German sites, in the order given: (site index, name,
    capacity type, price, max nodes)."""
    out = []
    for s, name, cap, price, max_nodes in tied:
        site = TIED_SITES[s]
        pool_id = Pool.make_id(site.id, name, cap)
        out.append(
            Pool(pool_id, site.id, name, cap, Arch.AMD64, 2, 4, 0, None, price, max_nodes, site.provider, "2026-01-01")
        )
    return build_pool_table(TIED_SITES, out)
