"""Which pool table a request solves over: dominated pools stay for requests with requirements."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from broker.catalog.store import Catalog
from broker.core.allocatable import NodeOverhead
from broker.core.domain import PlacementRequest, Workload
from broker.core.requirements import Requirement
from tests.unit.solver.support.typed_catalog import typed_table


def catalog() -> Catalog:
    t = typed_table()
    n = t.n_sites
    latency: Any = None  # not read by table_for
    return Catalog("v", {s.id: s for s in t.sites}, t, latency, np.zeros((n, n)), np.zeros(n), np.zeros((n, 3)), {})


def test_requests_with_requirements_keep_the_dominated_pools() -> None:
    cat = catalog()
    plain = PlacementRequest("p", (Workload("a", 1, 1.0, 1.0),))
    with_req = PlacementRequest(
        "r",
        (
            Workload("a", 1, 1.0, 1.0),
            Workload("b", 1, 1.0, 1.0, requirements=(Requirement.parse("arch", "In", ["arm64"]),)),
        ),
    )
    o = NodeOverhead()
    assert cat.table_for(plain, o) is cat.solver_table(o)
    assert cat.solver_table(o).n_pools < cat.table.n_pools  # the m7i pools are dominated here
    full = cat.table_for(with_req, o)
    assert full.n_pools == cat.table.n_pools  # every pool, at allocatable capacity
    assert (full.vcpus < full.raw_vcpus).all() and np.array_equal(full.raw_vcpus, cat.table.vcpus)


def test_a_catalog_copied_with_another_table_solves_over_that_table() -> None:
    # the allocatable tables are derived from `table`: a copy must not reuse the original's
    cat = catalog()
    o = NodeOverhead()
    before = cat.solver_table(o)
    scarce = dataclasses.replace(cat, table=dataclasses.replace(cat.table, max_nodes=np.zeros(cat.table.n_pools)))
    assert scarce.solver_table(o) is not before
    assert (scarce.solver_table(o).max_nodes == 0).all()


def test_a_replans_table_keeps_its_running_pools_and_is_built_once_per_set() -> None:
    cat = catalog()
    o = NodeOverhead()
    plain = PlacementRequest("p", (Workload("a", 1, 1.0, 1.0),))
    full = cat.table_for(plain, o)
    dominated = [p.id for p in cat.table.pools if p.id not in full.pool_index]
    assert dominated  # the typed catalog has dominated pools to keep
    kept = cat.table_for(plain, o, keep=dominated[:1])
    assert dominated[0] in kept.pool_index and kept.n_pools == full.n_pools + 1
    # the same placement re-planned again (a drill, an alert storm) reuses the table
    assert cat.table_for(plain, o, keep=list(dominated[:1])) is kept
    assert cat.table_for(plain, o, keep=["no-such-pool"]) is not kept
