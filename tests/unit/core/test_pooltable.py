"""The pool table's compaction: dominated pools left out, unless a placement in force runs on one."""

from __future__ import annotations

import numpy as np

from broker.core.domain import Arch, CapacityType, Pool
from broker.core.pooltable import build_pool_table
from tests.unit.solver.support.catalog import SITES, pools

# smaller and dearer than the site's "medium" (4 vCPU / 16 GiB): never worth buying
DEAR = Pool(Pool.make_id("aws:us-east-1", "dear-small", CapacityType.ONDEMAND), "aws:us-east-1", "dear-small",
            CapacityType.ONDEMAND, Arch.AMD64, 2, 4, 0, None, 1.0, None, "aws", "2026-01-01")  # fmt: skip


def test_compact_drops_dominated_pools_but_keeps_the_ones_asked_for() -> None:
    full = build_pool_table(SITES, [*pools(), DEAR])
    assert full.dominated[full.pool_index[DEAR.id]]
    lean = full.compact()
    assert DEAR.id not in lean.pool_index
    kept = full.compact(keep=[DEAR.id, "aws:nowhere/none/ondemand"])  # unknown ids are ignored
    assert set(kept.pool_index) == set(lean.pool_index) | {DEAR.id}
    i = kept.pool_index[DEAR.id]
    assert kept.dominated[i]  # still never a candidate
    assert kept.price[i] == 1.0 and kept.vcpus[i] == 2
    assert kept.pruned == lean.pruned - 1


def test_dominated_within_counts_only_the_pools_allowed() -> None:
    full = build_pool_table(SITES, [*pools(), DEAR])
    i = full.pool_index[DEAR.id]
    everyone = np.ones(full.n_pools, dtype=bool)
    assert full.dominated_within(everyone)[i]
    # with the pools that dominate it ruled out (its site's others), it is the best left there
    allowed = full.site_idx != full.site_idx[i]
    allowed[i] = True
    within = full.dominated_within(allowed)
    assert not within[i]
    assert not within[~allowed].any()  # only pools of `allowed` are ever marked
