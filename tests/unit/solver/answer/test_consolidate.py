"""Node consolidation: the least-filled nodes go where their replicas cost less elsewhere at the
same site, and nothing a packing must keep is broken on the way."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from broker.core.domain import Arch, CapacityType, Pool, Workload
from broker.core.pooltable import FloatArray, PoolTable, build_pool_table
from broker.solver import SolverOptions, solve
from broker.solver.answer.consolidate import Consolidator, Node, Nodes
from broker.solver.prepare.classes import SPOT, WorkloadData
from tests.unit.solver.support.catalog import TIED_SITES, problem
from tests.unit.solver.support.checks import assert_packed, assert_valid

OD = CapacityType.ONDEMAND
OD_KIND = 0 if SPOT != 0 else 1


@dataclass
class Caps:
    """Pools as consolidation reads them: (cpu, memory) per node, site, kind, price, node bound."""

    sizes: list[tuple[float, float]]
    site: list[int]
    kind: list[int]
    node_cost: FloatArray
    max_nodes: FloatArray

    def of(self, p: int) -> FloatArray:
        return np.array([*self.sizes[p], 0.0])

    @property
    def vcpus(self) -> FloatArray:
        return np.array([s[0] for s in self.sizes], dtype=np.float64)

    @property
    def mem(self) -> FloatArray:
        return np.array([s[1] for s in self.sizes], dtype=np.float64)

    @property
    def gpus(self) -> FloatArray:
        return np.zeros(len(self.sizes))

    def quota_room(self, q: int, nodes: object) -> float:
        return math.inf  # no family quotas here


def caps(rows: Sequence[tuple[float, float, int, int, float, float]]) -> Caps:
    """(cpu, memory, site, kind, price, max nodes) per pool."""
    return Caps(
        [(r[0], r[1]) for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
        np.array([r[4] for r in rows]),
        np.array([r[5] for r in rows]),
    )


def wd(name: str, cpu: float, mem: float, cand: list[int], *, max_per_node: int | None = None) -> WorkloadData:
    return WorkloadData(Workload(name, 1, cpu, mem, max_per_node=max_per_node), np.array(cand), np.zeros(len(cand)), ())


def cost(c: Caps, nodes: Nodes, ws: list[WorkloadData]) -> float:
    total = 0.0
    for p, rows in nodes.of.items():
        total += len([r for r in rows if r]) * float(c.node_cost[p])
        for row in rows:
            for k, n in row.items():
                total += n * float(dict(zip(ws[k].cand.tolist(), ws[k].rep_cost.tolist(), strict=True))[p])
    return total


def run(ws: list[WorkloadData], c: Caps, of: dict[int, list[Node]], pinned: set[int] | None = None) -> Nodes:
    nodes = Nodes({p: [dict(r) for r in rows] for p, rows in of.items()})
    Consolidator(ws, c, nodes, pinned or set()).run(time.perf_counter() + 5)
    return nodes


def test_a_sliver_on_a_big_node_moves_to_a_small_new_node() -> None:
    # pool 0: 8-vCPU nodes at 3.0; pool 1: 2-vCPU nodes at 0.5, same site; the second big node
    # holds one 1-vCPU replica
    c = caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 0, OD_KIND, 0.5, np.inf)])
    ws = [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0, 1])]
    nodes = run(ws, c, {0: [{0: 2}, {1: 1}]})
    assert [r for r in nodes.of[0] if r] == [{0: 2}]
    assert nodes.of[1] == [{1: 1}]
    assert cost(c, nodes, ws) == pytest.approx(3.5)


def test_room_on_a_running_node_comes_before_a_new_node() -> None:
    c = caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 0, OD_KIND, 0.5, np.inf)])
    ws = [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0, 1]), wd("half", 1, 2, [1])]
    nodes = run(ws, c, {0: [{0: 2}, {1: 1}], 1: [{2: 1}]})
    assert nodes.of[1] == [{2: 1, 1: 1}]  # the running small node had room: no node opened
    assert cost(c, nodes, ws) == pytest.approx(3.5)


def test_nothing_moves_when_it_would_not_save() -> None:
    c = caps([(8, 32, 0, OD_KIND, 1.0, np.inf), (2, 8, 0, OD_KIND, 1.0, np.inf)])
    ws = [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0, 1])]
    nodes = run(ws, c, {0: [{0: 2}, {1: 1}]})
    assert nodes.of == {0: [{0: 2}, {1: 1}]} and not nodes.touched


@pytest.mark.parametrize(
    ("why", "ws", "c"),
    [
        (
            "the cheap pool is at another site",
            [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0, 1])],
            caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 1, OD_KIND, 0.5, np.inf)]),
        ),
        (
            "the cheap pool is spot and the replica is not",
            [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0, 1])],
            caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 0, SPOT, 0.5, np.inf)]),
        ),
        (
            "the workload may not use the cheap pool",
            [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0])],
            caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 0, OD_KIND, 0.5, np.inf)]),
        ),
        (
            "the cheap pool is owned and full",
            [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0, 1])],
            caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 0, OD_KIND, 0.5, 0.0)]),
        ),
    ],
)
def test_rules_keep_a_node(why: str, ws: list[WorkloadData], c: Caps) -> None:
    nodes = run(ws, c, {0: [{0: 2}, {1: 1}]})
    assert nodes.of[0] == [{0: 2}, {1: 1}], why


def test_running_replicas_stay() -> None:
    c = caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 0, OD_KIND, 0.5, np.inf)])
    ws = [wd("big", 4, 8, [0, 1]), wd("small", 1, 2, [0, 1])]
    assert run(ws, c, {0: [{0: 2}, {1: 1}]}, pinned={1}).of[0] == [{0: 2}, {1: 1}]


def test_per_node_limits_hold_on_running_and_new_nodes() -> None:
    # three replicas of a one-per-node workload on the second big node: the small pool's running
    # node already has one, so two new small nodes take them
    c = caps([(8, 32, 0, OD_KIND, 3.0, np.inf), (2, 8, 0, OD_KIND, 0.5, np.inf)])
    ws = [wd("big", 8, 8, [0, 1]), wd("one", 0.5, 1, [0, 1], max_per_node=1)]
    nodes = run(ws, c, {0: [{0: 1}, {1: 1}], 1: [{1: 1}]})
    assert all(row.get(1, 0) <= 1 for rows in nodes.of.values() for row in rows)
    assert sum(row.get(1, 0) for row in nodes.of[1]) == 2


@pytest.mark.parametrize("seed", range(25))
def test_random_packings_keep_every_rule_and_never_cost_more(seed: int) -> None:
    rng = random.Random(seed)
    n_pools = rng.randint(2, 6)
    rows = [
        (rng.choice([2, 4, 8, 16]), rng.choice([4, 8, 16, 64]), rng.randint(0, 1), rng.choice([OD_KIND, SPOT]),
         round(rng.uniform(0.1, 4.0), 2), rng.choice([np.inf, np.inf, 3.0]))
        for _ in range(n_pools)
    ]  # fmt: skip
    c = caps(rows)
    ws: list[WorkloadData] = []
    of: dict[int, list[Node]] = {}
    for k in range(rng.randint(2, 10)):
        cpu, mem = rng.choice([0.25, 0.5, 1, 2]), rng.choice([0.5, 1, 2, 4])
        cand = sorted(rng.sample(range(n_pools), rng.randint(1, n_pools)))
        cand = [p for p in cand if c.sizes[p][0] >= cpu and c.sizes[p][1] >= mem]
        if not cand:
            continue
        limit = rng.choice([None, None, 1, 2])
        rep_cost = np.round(np.array([rng.uniform(0, 0.2) for _ in cand]), 3)
        item = WorkloadData(Workload(f"w{k}", 1, cpu, mem, max_per_node=limit), np.array(cand), rep_cost, ())
        ws.append(item)
        k = len(ws) - 1
        for _ in range(rng.randint(1, 6)):  # replicas, each on a node of its own
            p = rng.choice(cand)
            of.setdefault(p, []).append({k: 1})
    before = {p: [dict(r) for r in rs] for p, rs in of.items()}
    start = Nodes({p: [dict(r) for r in rs] for p, rs in of.items()})
    nodes = run(ws, c, of, pinned={0})
    assert cost(c, nodes, ws) <= cost(c, start, ws) + 1e-9
    placed: dict[tuple[int, int, int], int] = {}  # (workload, site, kind) -> replicas
    for p, rs in nodes.of.items():
        assert len([r for r in rs if r]) <= max(c.max_nodes[p], len(before.get(p, [])))
        for row in rs:
            load = sum((n * np.array([ws[k].w.cpu, ws[k].w.memory_gib, 0.0]) for k, n in row.items()), np.zeros(3))
            assert (load <= c.of(p) + 1e-9).all()
            for k, n in row.items():
                assert p in ws[k].cand.tolist()
                lim = ws[k].w.max_per_node
                assert lim is None or n <= lim
                key = (k, c.site[p], int(c.kind[p] == SPOT))
                placed[key] = placed.get(key, 0) + n
    want: dict[tuple[int, int, int], int] = {}
    for p, rs in before.items():
        for row in rs:
            for k, n in row.items():
                key = (k, c.site[p], int(c.kind[p] == SPOT))
                want[key] = want.get(key, 0) + n
    # the same replicas per workload and site; spot replicas may only have left spot
    for k, site in {(k, s) for k, s, _ in want}:
        assert sum(v for (kk, s, _), v in placed.items() if (kk, s) == (k, site)) == sum(
            v for (kk, s, _), v in want.items() if (kk, s) == (k, site)
        )
        assert placed.get((k, site, 1), 0) <= want.get((k, site, 1), 0)
    # the pinned workload's replicas stay on their nodes
    assert sorted(n for rs in nodes.of.values() for r in rs for k, n in r.items() if k == 0) == sorted(
        n for rs in before.values() for r in rs for k, n in r.items() if k == 0
    )


def _two_sizes(small_price: float) -> PoolTable:
    """A 2-vCPU pool at 1.0 and a 1-vCPU pool at `small_price`, at one site."""
    site = TIED_SITES[0]
    pools = [
        Pool(Pool.make_id(site.id, name, OD), site.id, name, OD, Arch.AMD64, cpu, 2 * cpu, 0, None, price, None,
             site.provider, "2026-01-01")
        for name, cpu, price in [("two", 2, 1.0), ("one", 1, small_price)]
    ]  # fmt: skip
    return build_pool_table(TIED_SITES, pools)


def _thirds() -> list[Workload]:
    """Five replicas of 0.66-0.70 vCPUs: the aggregate rule fits them on two 2-vCPU nodes, no
    node holds three of them."""
    return [Workload(f"w{i}", 1, 0.66 + 0.01 * i, 0.5) for i in range(5)]


# the search as it was before it saw nodes: the aggregate rule alone (no pattern cuts or counts)
BLIND = SolverOptions(pattern_cut_rounds=0, pattern_cut_mip_rounds=0, pattern_nodes_max_classes=0)


def test_solve_moves_replicas_off_nodes_they_fill_badly_onto_smaller_ones() -> None:
    pr = problem(_thirds(), tbl=_two_sizes(0.45))
    res = solve(pr, time_limit_s=5, options=BLIND)
    assert_valid(pr, res)
    assert_packed(pr, res)
    assert res.packing is not None
    # the model's two 2-vCPU nodes (2.0) pack onto three (3.0); the third's replica is cheaper on a
    # 1-vCPU node (2.45), and then so are each of the others' two (0.9 < 1.0): five small nodes
    assert (res.packing.aggregate_nodes, res.packing.nodes_consolidated) == (2, 3)
    assert {n.pool.split("/")[1]: n.count for n in res.nodes} == {"one": 5}
    assert res.cost_per_hour == pytest.approx(2.25)


def test_a_search_that_sees_nodes_leaves_consolidation_nothing_to_do() -> None:
    pr = problem(_thirds(), tbl=_two_sizes(0.45))
    res = solve(pr, time_limit_s=5)
    assert_valid(pr, res)
    assert res.packing is not None
    # the model counts what the 2-vCPU nodes' patterns hold (two of these replicas each), so its
    # own answer is the five small nodes, and packing adds nothing
    assert (res.packing.aggregate_nodes, res.packing.nodes_consolidated) == (5, 0)
    assert res.cost_per_hour == pytest.approx(2.25)
    assert res.packing.aggregate_cost_per_hour == pytest.approx(res.cost_per_hour)


def test_solve_keeps_the_packing_when_consolidating_saves_nothing() -> None:
    pr = problem(_thirds(), tbl=_two_sizes(1.0))
    res = solve(pr, time_limit_s=5)
    assert_valid(pr, res)
    assert res.packing is not None and res.packing.nodes_consolidated == 0
    assert res.cost_per_hour == pytest.approx(3.0)
