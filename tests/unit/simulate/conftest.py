"""A small catalog and fleet for the simulator's tests: three sites, a few real instance shapes."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import pytest

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind
from broker.core.latency import LatencyModel
from broker.core.pooltable import build_pool_table
from broker.simulate.market import CatalogParts
from pricing.traces import read_usage_traces

SITES = [
    Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0),
    Site("aws:us-west-2", "aws", SiteKind.PUBLIC, "us-west-2", "US", ("US",), 45.5, -122.7),
    Site("gcp:us-east1", "gcp", SiteKind.PUBLIC, "us-east1", "US", ("US",), 33.2, -80.0),
]
# (instance type, vcpus, GiB, on-demand $/h, spot $/h) at every site; gcp 10 % cheaper on demand
SHAPES = [("m5.large", 2, 8, 0.096, 0.04), ("m5.2xlarge", 8, 32, 0.384, 0.16), ("c5.4xlarge", 16, 32, 0.68, 0.3)]


def make_parts() -> CatalogParts:
    pools = []
    for s in SITES:
        factor = 0.9 if s.provider == "gcp" else 1.0
        for it, v, m, od, sp in SHAPES:
            for ct, price in ((CapacityType.ONDEMAND, od * factor), (CapacityType.SPOT, sp)):
                pid = Pool.make_id(s.id, it, ct)
                pools.append(Pool(pid, s.id, it, ct, Arch.AMD64, v, m, 0, None, price, None, "test", "2026-01-01"))
    table = build_pool_table(SITES, pools)
    latency = LatencyModel(
        {s.id: s for s in SITES},
        [
            ("aws:us-east-1", "aws:us-west-2", 60.0, 66.0),
            ("aws:us-east-1", "gcp:us-east1", 12.0, 14.0),
            ("aws:us-west-2", "gcp:us-east1", 55.0, 60.0),
        ],
    )
    n = len(SITES)
    egress = np.full((n, n), 0.02)
    return CatalogParts(table, latency, egress, np.full(n, 0.09), np.full((n, 3), 0.1))


FLEET: dict[str, Any] = {
    "name": "test-fleet",
    "start_day": 7,
    "days": 0.5,
    "seed": 3,
    "sites": [s.id for s in SITES],
    "tenants": [{"name": "a", "weight": 2}, {"name": "b", "weight": 1}],
    "user_regions": [{"name": "east", "lat": 40.7, "lon": -74.0}],
    "policies": {
        "kube-default": {"site": "aws:us-east-1", "instance_type": "m5.2xlarge"},
        "broker": {"forecast": "baseline", "replan_hours": 4, "time_limit_s": 2},
    },
    "events": {
        "spot_interruptions": {"risk_multiplier": 50},
        "site_outage": {"at_hours": 6, "hours": 1, "site": "aws:us-east-1"},
        "surge": {"day": 0, "hours": 4, "factor": 1.5, "workloads": ["web"]},
        "spot_price_change": {"at_hours": 3, "region": "gcp:us-east1", "factor": 3},
    },
    "workloads": [
        {"name": "web", "tenant": "a", "replicas": 3, "cpu": 1, "memory_gib": 2, "capacity_types": ["ondemand", "spot"],
         "latency_slo_ms": {"east": 40}, "depends_on": [{"workload": "db", "gib_per_hour": 1}],
         "usage": {"series": "az1633748"}},
        {"name": "db", "tenant": "a", "replicas": 2, "cpu": 2, "memory_gib": 8, "storage_gib": 50,
         "usage": {"series": "bb195"}},
        {"name": "batch", "tenant": "b", "replicas": 2, "cpu": 2, "memory_gib": 4,
         "capacity_types": ["ondemand", "spot"], "usage": {"series": "az1054036", "scale": "capacity"}},
    ],
}  # fmt: skip


@pytest.fixture(scope="session")
def parts() -> CatalogParts:
    return make_parts()


@pytest.fixture()
def fleet_doc() -> dict[str, Any]:
    return copy.deepcopy(FLEET)


@pytest.fixture(scope="session")
def traces() -> pd.DataFrame:
    return read_usage_traces()
