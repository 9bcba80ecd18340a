"""The share start: each class that needs one site on its cheapest share of a fully used node,
spot within its cap, spread classes and owned pools as in the base start."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from broker.solver import SolverOptions
from broker.solver.prepare.classes import SPOT
from broker.solver.search.column_generation import start
from broker.solver.search.placements import broken_classes, class_nodes, feasible, objective
from broker.solver.search.share_start import share_start, with_share_start
from broker.solver.types import ClassPlacement

from ..support.cases import CASES, case


def _share(mi, c: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    cl = mi.classes[c]
    cpu, mem, gpu = cl.demand
    use = np.maximum(cpu / mi.vcpus[cl.cand], mem / mi.mem[cl.cand])
    if gpu > 0:
        use = np.maximum(use, gpu / mi.gpus[cl.cand])
    share = mi.node_cost[cl.cand] * use + cl.rep_cost
    return np.where(np.isfinite(mi.max_nodes[cl.cand]), np.inf, share)


@pytest.mark.parametrize("seed", CASES)
def test_every_one_site_class_sits_on_its_cheapest_share_spot_within_its_cap(seed: int) -> None:
    mi, starts, _lp, _opt = case(seed)
    mi = dataclasses.replace(mi, max_moves=None)
    base = starts[-1]
    x = share_start(mi, base)
    assert x is not None
    assert feasible(mi, x, class_nodes(mi, x)) and not broken_classes(mi, x)
    for c, cl in enumerate(mi.classes):
        mine = {p: r for (cc, p), r in x.items() if cc == c}
        assert sum(mine.values()) == cl.replicas
        if cl.min_sites > 1:  # spread classes keep the base's sites
            assert mine == {p: r for (cc, p), r in base.items() if cc == c}
            continue
        share = _share(mi, c)
        spot = mi.cap_idx[cl.cand] == SPOT
        best_off = float(np.min(np.where(spot, np.inf, share)))
        on_spot = sum(r for p, r in mine.items() if mi.cap_idx[p] == SPOT)
        assert on_spot <= (cl.replicas if cl.spot_cap is None else cl.spot_cap)
        for p in mine:
            at = float(share[int(np.searchsorted(cl.cand, p))])
            assert np.isfinite(at)  # never an owned pool
            if mi.cap_idx[p] != SPOT:
                assert at == pytest.approx(best_off)
            else:  # spot only where it is the cheapest of all
                assert at < best_off


def test_no_share_start_under_a_cap_on_moves() -> None:
    mi, starts, _lp, _opt = case(0)
    assert share_start(dataclasses.replace(mi, max_moves=0), starts[-1]) is None


@pytest.mark.parametrize("seed", CASES)
def test_the_share_start_joins_the_starts_only_when_it_costs_less(seed: int) -> None:
    mi, starts, _lp, _opt = case(seed)
    st = start(mi, starts, time_limit_s=10, seed=0, opts=SolverOptions(), prove=False)
    out = with_share_start(st, starts)
    best = min(objective(st.mi, st.lay, x0) for x0 in starts if feasible(mi, x0, class_nodes(mi, x0)))
    if len(out) == len(starts) + 1:
        x: ClassPlacement = out[-1]
        assert objective(st.mi, st.lay, x) < best
        assert st.m.in_model[st.uni.cols.position(*np.array(list(x)).T)].all()  # its columns joined
    else:
        assert out == starts
