"""The baselines made cheaper (caches per candidate set and size, open nodes kept per candidate
set, scores kept with each node) place exactly as the plain versions did (reference.py): the same
placements, nodes and home-cloud candidates, on random requests with spread, spot caps, residency,
owned (bounded) pools, GPUs, storage, and many workloads sharing candidate sets and sizes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from broker.core.domain import CapacityType, Workload
from broker.core.pooltable import PoolTable
from broker.solver.baselines.costs import usd_arrays
from broker.solver.baselines.greedy import greedy_cheapest_fit
from broker.solver.baselines.home import home_workloads
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.candidates import prepare
from broker.solver.problem import PlacementProblem

from ..support.catalog import GDPR, US_ONLY, problem, table
from ..support.typed_catalog import typed_table
from . import reference

SHAPES = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (1.0, 4.0), (2.0, 8.0), (3.0, 6.0), (4.0, 16.0), (0.25, 0.5)]
SPOT_OK = (CapacityType.ONDEMAND, CapacityType.SPOT)


def _request(seed: int, n: int, tbl: PoolTable, *, gpus: bool = False) -> PlacementProblem:
    rnd = random.Random(seed)
    residencies = [US_ONLY] if gpus else [GDPR, US_ONLY]  # the typed catalog has one EU site
    ws = []
    for i in range(n):
        cpu, mem = rnd.choice(SHAPES)
        replicas = rnd.choice([1, 2, 3, 4, 6, 12, 30])
        kw: dict[str, object] = {}
        if rnd.random() < 0.3:
            kw["residency"] = rnd.choice(residencies)
        if replicas >= 2 and rnd.random() < 0.3:  # 3 sites where no residency rule leaves just 2
            kw["min_sites"] = 3 if replicas >= 3 and "residency" not in kw else 2
        # owned (bounded) pools for a few small workloads: more, and the greedy, which fills the
        # cheapest site first, runs out of them and finds no placement to compare
        owned = replicas <= 3 and "min_sites" not in kw and rnd.random() < 0.3
        kw["capacity_types"] = (CapacityType.ONDEMAND, CapacityType.RESERVED) if owned else (CapacityType.ONDEMAND,)
        if rnd.random() < 0.4:
            kw["capacity_types"] = (*kw["capacity_types"], CapacityType.SPOT)  # type: ignore[misc]
            if rnd.random() < 0.6:
                kw["max_spot_fraction"] = rnd.choice([0.0, 0.25, 0.5])
        if rnd.random() < 0.2:
            kw["storage_gib"] = rnd.choice([20.0, 100.0])
        if gpus and rnd.random() < 0.05:
            kw.update(gpus=1.0, residency=None, min_sites=1)
        ws.append(Workload(f"w{i}", replicas=replicas, cpu=cpu, memory_gib=mem, **kw))  # type: ignore[arg-type]
    return problem(ws, tbl=tbl)


def _search_arrays(p: PlacementProblem) -> PoolArrays:
    t = p.table
    prep = prepare(p)
    return PoolArrays(prep.node_cost, t.vcpus, t.memory_gib, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)


TABLES = {"synthetic": table, "owned-1": lambda: table(owned_nodes=1), "typed": typed_table}


@pytest.mark.parametrize("tbl", list(TABLES))
@pytest.mark.parametrize("seed", range(12))
def test_the_baselines_place_as_the_plain_versions_did(tbl: str, seed: int) -> None:
    p = _request(seed, 60, TABLES[tbl](), gpus=tbl == "typed")
    prep = prepare(p)
    assert not prep.conflicts, prep.conflicts
    wl = prep.workloads
    arr = _search_arrays(p)
    assert greedy_cheapest_fit(wl, arr) == reference.greedy_cheapest_fit(wl, arr)
    assert kubernetes_filter_score(wl, arr) == reference.kubernetes_filter_score(wl, arr)

    usd = usd_arrays(p)
    providers = [str(x) for x in p.table.site_provider]
    home, ref = home_workloads(wl, usd, providers), reference.home_workloads(wl, usd, providers)
    for a, b in zip(home, ref, strict=True):
        assert np.array_equal(a.cand, b.cand) and np.array_equal(a.rep_cost, b.rep_cost)
        assert a.signature == b.signature
    assert kubernetes_filter_score(home, usd) == reference.kubernetes_filter_score(ref, usd)


def test_the_comparison_can_tell_placements_apart() -> None:
    # the equivalence above is not vacuous: the baselines place these requests, and differently
    # for different requests
    found = []
    for seed in range(3):
        p = _request(seed, 60, table())
        prep = prepare(p)
        assert not prep.conflicts
        arr = _search_arrays(p)
        replicas = sum(w.replicas for w in p.request.workloads)
        placed = kubernetes_filter_score(prep.workloads, arr)
        assert placed is not None and sum(placed[0].values()) == replicas
        greedy = greedy_cheapest_fit(prep.workloads, arr)
        assert greedy is not None and sum(greedy.values()) == replicas
        found.append(placed)
    assert found[0] != found[1]


@pytest.mark.parametrize("tbl", ["synthetic", "owned-1"])
def test_runs_of_alike_workloads_place_as_one_by_one(tbl: str) -> None:
    """Consecutive workloads of one shape and one candidate set start from the view of the one
    before (the largest requests are thousands of single-replica workloads of a shape)."""
    rnd = random.Random(5)
    ws = []
    for i in range(90):
        cpu, mem = SHAPES[(i // 15) % 3]  # runs of 15 alike, then another shape
        spot = (CapacityType.ONDEMAND, CapacityType.SPOT) if i % 45 < 30 else (CapacityType.ONDEMAND,)
        ws.append(Workload(f"w{i}", replicas=rnd.choice([1, 1, 2]), cpu=cpu, memory_gib=mem, capacity_types=spot))
    p = problem(ws, tbl=TABLES[tbl]())
    prep = prepare(p)
    arr = _search_arrays(p)
    placed = kubernetes_filter_score(prep.workloads, arr)
    assert placed is not None and placed == reference.kubernetes_filter_score(prep.workloads, arr)
