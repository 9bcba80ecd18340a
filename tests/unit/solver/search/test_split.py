"""Enterprise-sized requests solved in groups of classes (search/split.py), forced onto small
instances by the options."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from broker.core.domain import Workload
from broker.solver import SolverOptions
from broker.solver.model.layout import make_layout
from broker.solver.search import split
from broker.solver.search.placements import class_nodes, feasible, objective

from ..support.cases import case, instance, search_input_of
from ..support.catalog import problem, table

solve_mod = importlib.import_module("broker.solver.solve")


def _in_three(mi):  # type: ignore[no-untyped-def]
    """Options that split `mi` into about three groups."""
    return SolverOptions(group_weight=float(_weights(mi).sum()) / 3)


def _weights(mi):  # type: ignore[no-untyped-def]
    return np.sqrt([len(c.cand) for c in mi.classes])


@pytest.mark.parametrize("n_groups", [1, 2, 3, 5])
def test_groups_cover_every_class_once_and_keep_dependency_pairs_together(n_groups: int) -> None:
    mi, _starts, _lp, _opt = case(0)
    parts = split.groups(mi, _weights(mi), n_groups)
    assert 1 <= len(parts) <= n_groups
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(mi.classes)))
    group_of = {int(c): g for g, part in enumerate(parts) for c in part}
    pairs = [(k, v) for k, cl in enumerate(mi.classes) for v, _ in cl.deps]
    assert pairs and all(group_of[k] == group_of[v] for k, v in pairs)
    if n_groups > 1:
        assert len(parts) > 1


def test_a_group_request_renumbers_its_classes_and_placements_merge_back() -> None:
    mi, starts, _lp, _opt = case(6)
    x = starts[0]
    parts = split.groups(mi, _weights(mi), 3)
    back = split.merged([(g, split.restrict(x, g)) for g in parts])
    assert back == x
    for g in parts:
        sub = split.sub_input(mi, g)
        assert [cl.members for cl in sub.classes] == [mi.classes[int(c)].members for c in g]
        for k, cl in enumerate(sub.classes):  # dependencies point at the same classes, renumbered
            assert [(int(g[v]), gib) for v, gib in cl.deps] == mi.classes[int(g[k])].deps
        assert sub.current_total == pytest.approx(float(sub.keep_cur.sum()))
        assert {int(g[c]) for c in sub.keep_class} <= set(g.tolist())
        part = split.restrict(x, g)
        assert feasible(sub, part, class_nodes(sub, part))
    # owned capacity the groups before used is gone for the next
    owned = np.flatnonzero(np.isfinite(mi.max_nodes))
    assert len(owned)
    p = int(owned[0])
    sub = split.sub_input(mi, parts[0], {p: 1})
    assert sub.max_nodes[p] == mi.max_nodes[p] - 1 and np.isinf(mi.max_nodes).sum() == np.isinf(sub.max_nodes).sum()


@pytest.mark.parametrize("seed", [0, 2, 6])
def test_a_request_in_groups_is_feasible_whole_and_its_bound_holds(seed: int) -> None:
    mi, starts, _lp, opt = case(seed)
    res = split.search_in_groups(mi, starts=starts, time_limit_s=6.0, seed=0, options=_in_three(mi))
    assert res is not None
    assert feasible(mi, res.x, class_nodes(mi, res.x))
    assert res.objective == pytest.approx(objective(mi, make_layout(mi), res.x))
    assert res.lower_bound <= opt + 1e-7 <= res.objective + 1e-7


def test_a_group_without_a_placement_hands_the_request_to_the_whole_search(monkeypatch: pytest.MonkeyPatch) -> None:
    mi, starts, _lp, opt = case(2)
    real = split.search
    calls: list[bool] = []

    def groups_fail(m, **kw):  # type: ignore[no-untyped-def]
        calls.append(kw.get("prove", True))
        return None if kw.get("prove") is False else real(m, **kw)

    monkeypatch.setattr(split, "search", groups_fail)
    res = split.search_in_groups(mi, starts=starts, time_limit_s=6.0, seed=0, options=_in_three(mi))
    assert calls == [False, True]
    assert res is not None and feasible(mi, res.x, class_nodes(mi, res.x))
    assert res.lower_bound <= opt + 1e-7


def test_solve_takes_the_group_path_above_its_size_and_not_with_a_cap_on_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = instance(0)
    opts = SolverOptions(split_min_cols=0, group_weight=2.0)
    used: list[str] = []
    real = solve_mod.search_in_groups
    monkeypatch.setattr(solve_mod, "search_in_groups", lambda mi, **kw: used.append("groups") or real(mi, **kw))
    res = solve_mod.solve(p, time_limit_s=6, options=opts)
    assert used == ["groups"] and res.gap_pct is not None and res.cost_per_hour > 0
    capped = dataclasses.replace(p, request=dataclasses.replace(p.request, max_moves=1))
    solve_mod.solve(capped, time_limit_s=6, options=opts)
    assert used == ["groups"]  # a cap on moves couples every class: solved whole


def test_groups_share_owned_capacity_rather_than_each_taking_all_of_it() -> None:
    # nine workloads that would each fill the two cheap owned nodes (48 vCPU each) on their own
    ws = [Workload(f"w{i}", replicas=6, cpu=4, memory_gib=8 + i) for i in range(9)]  # nine classes
    p = problem(ws, tbl=table(owned_nodes=2))
    mi, starts = search_input_of(p)
    owned = np.flatnonzero(np.isfinite(mi.max_nodes))
    res = split.search_in_groups(mi, starts=starts, time_limit_s=6.0, seed=0, options=_in_three(mi))
    assert res is not None and len(split.groups(mi, _weights(mi), 3)) == 3
    nodes = class_nodes(mi, res.x)
    assert sum(nodes.get(int(q), 0) for q in owned) == 2  # all of it used, and no more
    assert feasible(mi, res.x, nodes)
