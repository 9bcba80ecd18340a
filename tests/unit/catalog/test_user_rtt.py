"""Catalog.user_rtt: one RTT vector per user region and statistic, memoised per catalog."""

from __future__ import annotations

import dataclasses

import numpy as np

from broker.catalog.store import Catalog
from broker.core.domain import UserRegion
from broker.core.latency import LatencyModel
from broker.core.pooltable import build_pool_table
from tests.unit.solver.support.typed_catalog import FACTS, SITES, typed_pools

MEASURED = [  # src, dst, p50 ms, p95 ms
    ("aws:us-east-1", "azure:eastus", 8.0, 12.0),
    ("aws:us-east-1", "gcp:us-central1", 30.0, 40.0),
    ("azure:eastus", "gcp:us-central1", 28.0, 37.0),
    ("aws:us-east-1", "private:fra-dc1", 90.0, 110.0),
]


def catalog(site_ids: list[str]) -> Catalog:
    sites = [s for s in SITES if s.id in site_ids]
    t = build_pool_table(sites, [p for p in typed_pools() if p.site in site_ids], FACTS)
    n = t.n_sites
    latency = LatencyModel({s.id: s for s in sites}, [r for r in MEASURED if r[0] in site_ids and r[1] in site_ids])
    return Catalog("v", {s.id: s for s in sites}, t, latency, np.zeros((n, n)), np.zeros(n), np.zeros((n, 3)), {})


def test_a_region_is_computed_once_per_catalog() -> None:
    cat = catalog([s.id for s in SITES])
    users = [UserRegion("nyc", lat=40.7, lon=-74.0), UserRegion("dc", site="aws:us-east-1")]
    first = cat.user_rtt(users)
    assert first["nyc"].shape == (cat.table.n_sites,)
    assert first["dc"][cat.table.site_index["aws:us-east-1"]] == 0.0  # users at a site
    again = cat.user_rtt(users)
    assert all(again[k] is first[k] for k in first)


def test_a_copy_with_other_sites_does_not_reuse_the_originals_memo() -> None:
    # the memo is derived from the sites and the latency model: a copy with other ones
    # (dataclasses.replace) must compute its own vectors, of its own sites
    full = catalog([s.id for s in SITES])
    users = [UserRegion("nyc", lat=40.7, lon=-74.0), UserRegion("dc", site="aws:us-east-1")]
    before = full.user_rtt(users)
    fewer = catalog(["aws:us-east-1", "azure:eastus", "gcp:us-central1"])
    copy = dataclasses.replace(full, sites=fewer.sites, table=fewer.table, latency=fewer.latency)
    got = copy.user_rtt(users)
    assert got["nyc"].shape == (3,) and got["dc"].shape == (3,)
    assert np.array_equal(got["nyc"], fewer.user_rtt(users)["nyc"])
    assert got["dc"][copy.table.site_index["aws:us-east-1"]] == 0.0
    # and the original keeps its own
    assert all(full.user_rtt(users)[k] is before[k] for k in before)
