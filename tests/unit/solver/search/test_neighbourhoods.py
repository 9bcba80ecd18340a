"""Neighbourhoods of the incumbent (search/neighbourhoods.py): which classes a neighbourhood frees,
what it offers them, what the rest keeps; and how incumbents are compared (search/placements.py)."""

from __future__ import annotations

import numpy as np
import pytest

from broker.solver import SolverOptions
from broker.solver.model.layout import make_layout
from broker.solver.model.master import Master
from broker.solver.model.universe import make_universe
from broker.solver.search import neighbourhoods
from broker.solver.search.column_generation import start
from broker.solver.search.neighbourhoods import columns_on_pools, idle_cost, pick_classes, rens_and_second
from broker.solver.search.placements import class_nodes, columns_of, objective, routed_egress

from ..support.cases import case


def test_a_neighbourhood_frees_the_classes_on_the_idlest_pools_of_the_sites_it_draws() -> None:
    mi, starts, _lp, _opt = case(0)
    x = starts[0]
    nodes = class_nodes(mi, x)
    idle = idle_cost(mi, x, nodes)
    placed = {c for c, _p in x}
    assert len(placed) > 3
    free = pick_classes(mi, x, nodes, np.random.default_rng(1), target=3)
    assert free.sum() == 3 and set(np.flatnonzero(free).tolist()) <= placed
    # a site freed in part gives the classes on its idlest pools first
    sites_of: dict[int, set[int]] = {}
    for c, p in x:
        sites_of.setdefault(c, set()).add(int(mi.site_idx[p]))
    for s in {int(mi.site_idx[p]) for _c, p in x}:
        on_site = [(c, p) for c, p in x if sites_of[c] == {s}]
        kept = [idle.get(p, 0.0) for c, p in on_site if not free[c]]
        freed = [idle.get(p, 0.0) for c, p in on_site if free[c]]
        if kept and freed:
            assert max(freed) >= max(kept)
    everything = pick_classes(mi, x, nodes, np.random.default_rng(1), target=len(mi.classes))
    assert set(np.flatnonzero(everything).tolist()) == placed


def test_offered_columns_are_candidates_of_free_classes_on_those_pools() -> None:
    mi, starts, _lp, _opt = case(2)
    uni = make_universe(mi, make_layout(mi))
    free = np.zeros(len(mi.classes), dtype=bool)
    free[[0, 3]] = True
    pools = np.array(sorted(class_nodes(mi, starts[0])), dtype=np.int64)
    cols = columns_on_pools(uni.cols, free, pools)
    got = set(zip(uni.cols.cls(cols).tolist(), uni.cols.pool[cols].tolist(), strict=True))
    want = {(c, int(p)) for c in (0, 3) for p in pools if p in set(mi.classes[c].cand.tolist())}
    assert got == want


def test_held_classes_keep_their_replicas_and_the_rest_never_costs_more() -> None:
    mi, starts, _lp, _opt = case(6)
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    x = starts[0]
    free = np.zeros(len(mi.classes), dtype=bool)
    free[: max(1, len(mi.classes) // 3)] = True
    m = Master(mi, lay, uni)
    offer = columns_on_pools(uni.cols, free, np.arange(mi.n_pools))  # every pool for the free ones
    m.add_columns(np.concatenate([offer, columns_of(x, uni.cols)]))
    m.hold(free, x)
    res = m.solve_mip(time_limit_s=20, seed=0, hint=m.hint(x, class_nodes(mi, x)), rel_gap=1e-9)
    assert res.status == "optimal"
    y = m.placement(res.x)
    held = {k: r for k, r in x.items() if not free[k[0]]}
    assert {k: r for k, r in y.items() if not free[k[0]]} == held
    assert objective(mi, lay, y, routed=False) <= objective(mi, lay, x, routed=False) + 1e-9


def test_incumbents_are_compared_by_the_egress_solve_reports() -> None:
    """The sender's traffic leaves for the cheapest site where its peer actually runs."""
    mi, _starts, _lp, _opt = case(0)
    k = next(i for i, c in enumerate(mi.classes) if c.deps)
    v, gib = mi.classes[k].deps[0]
    kc, vc = mi.classes[k], mi.classes[v]
    site_k = int(mi.site_idx[kc.cand[0]])
    peer_pools = [int(p) for p in vc.cand if int(mi.site_idx[p]) != site_k]
    by_site = {int(mi.site_idx[p]): p for p in peer_pools}
    assert len(by_site) >= 2
    (s1, p1), (s2, p2) = list(by_site.items())[:2]
    x = {(k, int(kc.cand[0])): kc.replicas, (v, p1): vc.replicas - 1, (v, p2): 1}
    want = mi.cost_weight * gib * 1.073741824 * float(min(mi.egress[site_k, s1], mi.egress[site_k, s2]))
    lay = make_layout(mi)
    assert abs(routed_egress(mi, x) - want) < 1e-9
    routed, model = objective(mi, lay, x), objective(mi, lay, x, routed=False)
    assert model <= routed + 1e-9


def test_a_sub_mip_model_keeps_only_the_offered_pairs() -> None:
    mi, starts, _lp, _opt = case(6)
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    offer = columns_of(starts[0], uni.cols)
    sub = mi.restricted(uni.cols.cls(offer), uni.cols.pool[offer])
    want = {c: sorted(p for cc, p in starts[0] if cc == c) for c in range(len(mi.classes))}
    for c, cl in enumerate(sub.classes):
        assert cl.cand.tolist() == want[c]
        full = mi.classes[c]
        assert cl.rep_cost.tolist() == full.rep_cost[np.searchsorted(full.cand, cl.cand)].tolist()
    # a running replica whose pool is not offered loses its keep row; offered ones keep it
    kept = {(int(c), int(p)) for c, p in zip(sub.keep_class, sub.keep_pool, strict=True)}
    assert kept == {(int(c), int(p)) for c, p in zip(mi.keep_class, mi.keep_pool, strict=True) if (c, p) in starts[0]}
    # and its spread/egress structure covers only the offered sites
    assert make_layout(sub).n_z <= lay.n_z


def _calls_after_rens(monkeypatch: pytest.MonkeyPatch, max_egress_share: float) -> int:
    """Neighbourhood MIPs rens_and_second runs on a big request (every universe counts as big here)
    whose incumbent is a start paying egress."""
    mi, starts, _lp, _opt = case(0)
    opts = SolverOptions(neighbourhood_max_cols=0, second_max_egress_share_big=max_egress_share)
    st = start(mi, [], time_limit_s=30, seed=0, opts=opts, prove=False)
    x = starts[0]
    assert routed_egress(mi, x) > 0
    st.incumbent, st.ub = x, objective(mi, st.lay, x)
    st.lp_support = columns_of(x, st.uni.cols)
    calls: list[int] = []

    def improve(_st: object, cols: np.ndarray, _seconds: float) -> bool:
        calls.append(len(cols))
        return False

    monkeypatch.setattr(neighbourhoods, "improve", improve)
    rens_and_second(st)
    return len(calls)


def test_big_requests_paying_egress_skip_the_second_neighbourhood(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _calls_after_rens(monkeypatch, 0.0) == 1  # RENS only: the LNS gets the time
    assert _calls_after_rens(monkeypatch, 1.1) == 2  # egress below the share: RENS and the second
