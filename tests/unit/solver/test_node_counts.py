"""The vectorised node counts (`costs.placement_nodes`, `placements.class_nodes`) against the
rule written out one item at a time: the aggregate of cpu, memory and GPUs over one node, each
workload's (class's) replicas one node at a time, and the large-replica weights."""

from __future__ import annotations

import dataclasses
import math
import random
from types import SimpleNamespace

import numpy as np
import pytest

from broker.core.domain import Workload
from broker.solver.costs import placement_nodes
from broker.solver.model.layout import ModelInput
from broker.solver.prepare.classes import large_replica_table
from broker.solver.search.placements import class_nodes
from broker.solver.types import ClassPlacement

from .support.cases import CASES, instance, search_input_of


def _count(load: np.ndarray, caps: np.ndarray, need: int, large: np.ndarray) -> int:
    agg = math.ceil(float(np.max(load / caps)) - 1e-9)
    return max(1, agg, need, math.ceil(float(large.max(initial=0.0)) - 1e-9))


def reference_workload_nodes(workloads, x, vcpus, mem, gpus) -> dict[int, int]:  # type: ignore[no-untyped-def]
    totals: dict[int, list] = {}  # type: ignore[type-arg]
    for (k, p), r in x.items():
        w = workloads[k].w
        size = np.array([w.cpu, w.memory_gib, w.gpus])
        cap = np.array([vcpus[p], mem[p], gpus[p]], dtype=np.float64)
        fit = min(
            math.floor(vcpus[p] / w.cpu + 1e-9),
            math.floor(mem[p] / w.memory_gib + 1e-9),
            math.floor(gpus[p] / w.gpus + 1e-9) if w.gpus > 0 else 10**9,
            w.max_per_node or 10**9,
        )
        load, need, large = totals.get(p, [np.zeros(3), 0, np.zeros(6)])
        totals[p] = [load + r * size, max(need, math.ceil(r / max(fit, 1))), large + r * large_replica_table(size, cap)]
    caps = {p: np.array([vcpus[p], mem[p], max(float(gpus[p]), 1e-12)]) for p in totals}
    return {p: _count(load, caps[p], need, large) for p, (load, need, large) in totals.items()}


def reference_class_nodes(mi: ModelInput, x: ClassPlacement) -> dict[int, int]:
    totals: dict[int, list] = {}  # type: ignore[type-arg]
    for (c, p), r in x.items():
        fit = float(mi.fit(np.array([c]), np.array([p]))[0][0])
        weight = mi.large_weights(np.array([c]), np.array([p]))[0]
        load, need, large = totals.get(p, [np.zeros(3), 0, np.zeros(mi.large_kinds)])
        totals[p] = [load + r * mi.classes[c].demand, max(need, math.ceil(r / fit - 1e-9)), large + r * weight]
    caps = {p: np.array([mi.vcpus[p], mi.mem[p], max(mi.gpus[p], 1e-12)]) for p in totals}
    return {p: _count(load, caps[p], need, large) for p, (load, need, large) in totals.items()}


@pytest.mark.parametrize("seed", CASES)
def test_class_nodes_match_the_rule_item_by_item(seed: int) -> None:
    mi, starts = search_input_of(instance(seed))
    assert mi.pattern_nodes is not None  # a small request: the search counts patterns
    blind = dataclasses.replace(mi, pattern_nodes=None)
    rnd = random.Random(seed)
    for _ in range(30):
        x: ClassPlacement = {}
        for c, cl in enumerate(mi.classes):  # several classes on shared pools, some heavy
            for p in rnd.sample(cl.cand.tolist(), k=min(len(cl.cand), rnd.randint(1, 3))):
                x[(c, int(p))] = rnd.randint(1, 40)
        assert class_nodes(blind, x) == reference_class_nodes(mi, x)
        _between_the_rule_and_one_class_a_node(mi, x)
    for x0 in starts:
        assert class_nodes(blind, x0) == reference_class_nodes(mi, x0)
        _between_the_rule_and_one_class_a_node(mi, x0)
    assert class_nodes(mi, {}) == {}


def _between_the_rule_and_one_class_a_node(mi: ModelInput, x: ClassPlacement) -> None:
    """With pattern counts, a pool needs at least what the rule says and at most what its
    classes need on nodes of their own (a packing), where several classes share it."""
    seeing, rule = class_nodes(mi, x), reference_class_nodes(mi, x)
    alone: dict[int, int] = {}
    for (c, p), r in x.items():
        fit = float(mi.fit(np.array([c]), np.array([p]))[0][0])
        alone[p] = alone.get(p, 0) + math.ceil(r / fit - 1e-9)
    assert seeing.keys() == rule.keys()
    for p, n in seeing.items():
        assert rule[p] <= n <= max(rule[p], alone[p])


def test_placement_nodes_match_the_rule_item_by_item() -> None:
    rnd = random.Random(3)
    vcpus = np.array([2.0, 3.82, 15.5, 95.5, 7.9])
    mem = np.array([4.0, 13.05, 60.0, 380.0, 30.0])
    gpus = np.array([0.0, 0.0, 1.0, 0.0, 4.0])
    for _ in range(200):
        workloads = []
        for i in range(rnd.randint(1, 8)):
            gpu = rnd.choice([0, 0, 0, 1])
            cpu, memory = rnd.choice([(0.25, 0.5), (0.5, 1.0), (1.0, 4.0), (1.9, 3.5), (3.0, 6.0), (0.1, 12.0)])
            per_node = rnd.choice([None, None, 1, 2])
            workloads.append(SimpleNamespace(w=Workload(f"w{i}", 1, cpu, memory, gpu, max_per_node=per_node)))
        x = {}
        for k, wd in enumerate(workloads):
            w = wd.w
            pools = [p for p in range(len(vcpus)) if gpus[p] >= w.gpus and vcpus[p] >= w.cpu and mem[p] >= w.memory_gib]
            for p in rnd.sample(pools, k=min(len(pools), rnd.randint(1, 2))):
                x[(k, p)] = rnd.randint(1, 30)
        got = placement_nodes(workloads, x, vcpus=vcpus, mem=mem, gpus=gpus)  # type: ignore[arg-type]
        assert got == reference_workload_nodes(workloads, x, vcpus, mem, gpus)
