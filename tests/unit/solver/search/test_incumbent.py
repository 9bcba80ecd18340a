"""The first incumbents: the rounded LP, its broken classes placed as in a feasible start, and
what the second neighbourhood offers."""

from __future__ import annotations

import time

import numpy as np
import pytest

from broker.solver import SolverOptions
from broker.solver.model.master import Master
from broker.solver.search import neighbourhoods, search
from broker.solver.search.column_generation import start
from broker.solver.search.incumbent import first_incumbent, improve
from broker.solver.search.placements import broken_classes, class_nodes, feasible, repaired
from broker.solver.types import ClassPlacement

from ..support.cases import case


def _spot_and_not(mi, c: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    cand = mi.classes[c].cand
    spot = cand[mi.cap_idx[cand] == 1]
    other = cand[mi.cap_idx[cand] != 1]
    return int(spot[0]), int(other[0])


def test_each_rule_a_class_can_break_is_found() -> None:
    mi, starts, _lp, _opt = case(0)
    x = starts[0]
    assert feasible(mi, x, class_nodes(mi, x)) and not broken_classes(mi, x)
    capped = next(i for i, c in enumerate(mi.classes) if c.spot_cap is not None and c.min_sites == 1)
    spread = next(i for i, c in enumerate(mi.classes) if c.min_sites > 1)
    other = next(i for i in range(len(mi.classes)) if i not in (capped, spread))

    def moved(c: int, to: dict[int, int]) -> ClassPlacement:
        y = {k: r for k, r in x.items() if k[0] != c}
        y.update({(c, p): r for p, r in to.items()})
        return y

    spot, ondemand = _spot_and_not(mi, capped)
    assert broken_classes(mi, moved(capped, {spot: mi.classes[capped].replicas})) == {capped}
    assert not broken_classes(mi, moved(capped, {ondemand: mi.classes[capped].replicas}))
    one_pool = int(mi.classes[spread].cand[0])
    assert broken_classes(mi, moved(spread, {one_pool: mi.classes[spread].replicas})) == {spread}
    some = {p: r for (c, p), r in x.items() if c == other}
    p0 = next(iter(some))
    assert broken_classes(mi, moved(other, {**some, p0: some[p0] + 1})) == {other}


def test_a_rounded_lp_keeps_its_sound_classes_and_takes_the_start_for_the_broken_ones() -> None:
    mi, starts, _lp, _opt = case(6)
    start = starts[0]
    capped = next(i for i, c in enumerate(mi.classes) if c.spot_cap is not None and c.min_sites == 1)
    spot, _ = _spot_and_not(mi, capped)
    # a rounded LP stand-in: each class whole on its first candidate, one over its spot cap
    rounded: ClassPlacement = {(c, int(cl.cand[0])): cl.replicas for c, cl in enumerate(mi.classes)}
    rounded = {k: r for k, r in rounded.items() if k[0] != capped}
    rounded[(capped, spot)] = mi.classes[capped].replicas  # over its spot cap
    broken = broken_classes(mi, rounded)
    assert capped in broken
    fixed = repaired(mi, rounded, start)
    assert not broken_classes(mi, fixed)
    for (c, p), r in fixed.items():
        assert r == (start if c in broken else rounded)[(c, p)]
    assert {c for c, _ in fixed} == set(range(len(mi.classes)))
    assert repaired(mi, fixed, start) == fixed  # nothing broken: unchanged


def test_on_big_requests_a_class_the_lp_splits_is_offered_two_columns_in_the_second_neighbourhood(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mi, starts, _lp, _opt = case(0)
    calls: list[tuple[int, set[int]]] = []
    real = neighbourhoods.best_per_class

    def spy(cols, priced, mask, k):  # type: ignore[no-untyped-def]
        calls.append((k, set(cols.cls(priced.idx[mask]).tolist())))
        return real(cols, priced, mask, k)

    monkeypatch.setattr(neighbourhoods, "best_per_class", spy)
    # as if big; no LNS after the second neighbourhood
    opts = SolverOptions(neighbourhood_max_cols=-1, lns_share=0.0, max_cg_rounds=1)
    res = search(mi, starts=starts, time_limit_s=10, seed=0, options=opts)
    assert res is not None
    ones = [c for k, c in calls if k == opts.second_big_best]
    twos = [c for k, c in calls if k == opts.second_big_split]
    assert len(ones) == len(twos) == 1
    assert twos[0] and twos[0] < ones[0]  # some classes, not all


def test_no_improving_mip_is_started_without_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """HiGHS' presolve and root ignore a limit of milliseconds: with the time up, `improve`
    starts no MIP (the search ran past its limit doing so) and the incumbent stands."""
    mi, starts, _lp, _opt = case(0)
    st = start(mi, starts, time_limit_s=10, seed=0, opts=SolverOptions(), prove=False)
    first_incumbent(st, starts)
    before = st.incumbent

    def no_mip(*args: object, **kw: object) -> None:
        raise AssertionError("a MIP was started without time left")

    monkeypatch.setattr(Master, "solve_mip", no_mip)
    assert improve(st, np.arange(st.uni.size), 5.0, until=time.perf_counter() - 1.0) is False
    assert improve(st, np.arange(st.uni.size), 0.0) is False
    assert st.incumbent is before
