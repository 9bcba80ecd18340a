"""The restricted master's HiGHS handling."""

from __future__ import annotations

import numpy as np
import pytest

from broker.solver.model.layout import make_layout
from broker.solver.model.master import Master
from broker.solver.model.universe import make_universe
from broker.solver.search.placements import columns_of

from ..support.cases import case


def test_a_later_lp_round_gets_its_own_time_limit() -> None:
    """HiGHS counts an LP's time limit over every run() of the model: without adding the run time
    so far, a round given 0.05 s after 0.1 s of earlier rounds stops at once, unsolved."""
    mi, starts, _lp, _opt = case(0)
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    m = Master(mi, lay, uni)
    m.add_columns(columns_of(starts[0], uni.cols))  # a feasible start
    while m.h.getRunTime() < 0.1:
        assert m.solve_lp() is not None
    m.add_columns(np.arange(uni.size))  # the next round has work to do
    again = m.solve_lp(time_limit_s=0.05)
    assert again is not None


def test_tighten_caps_the_fit_rows_and_reaches_the_capped_lp() -> None:
    """Loose fit rows (not capped at a class's replicas) give the LP of a relaxation; tighten()
    turns the same model into the capped one, whose LP it then solves from the kept basis."""
    for seed in range(4):
        mi, _starts, _lp, _opt = case(seed)
        lay = make_layout(mi)
        uni = make_universe(mi, lay)
        everything = np.arange(uni.size)
        loose = Master(mi, lay, uni, loose_fit=True)
        loose.add_columns(everything)
        capped = Master(mi, lay, uni)
        capped.add_columns(everything)
        lp_loose, lp_capped = loose.solve_lp(), capped.solve_lp()
        assert lp_loose is not None and lp_capped is not None
        if lp_loose.value < lp_capped.value - 1e-6:  # a case where the caps bind
            break
    else:
        raise AssertionError("no case where capping the fit rows raises the LP")
    loose.tighten()
    assert not loose.loose_fit
    fit, stronger = mi.fit(*loose.x_keys())
    np.testing.assert_array_equal(loose.x_fit, fit)
    np.testing.assert_array_equal(loose.x_stronger, stronger)  # their rows join when broken
    again = loose.solve_lp()
    assert again is not None
    assert again.value == pytest.approx(lp_capped.value, rel=1e-7)


def test_fit_rows_join_only_when_the_lp_breaks_them_and_give_the_lp_of_all_of_them() -> None:
    """An LP holds the fit rows its solution would break, no others: the same value as with a
    row for every column, and a MIP holds every row."""
    for seed in (0, 2):  # the cases whose full model is feasible
        mi, _starts, _lp, _opt = case(seed)
        lay = make_layout(mi)
        uni = make_universe(mi, lay)
        lazy = Master(mi, lay, uni)
        lazy.add_columns(np.arange(uni.size))
        lp = lazy.solve_lp()
        assert lp is not None
        eager = Master(mi, lay, uni)
        eager.add_columns(np.arange(uni.size))
        eager._add_fit_rows(np.arange(len(eager.x_col)))
        assert (eager.fit_row[eager.x_stronger] >= 0).all()
        full = eager.solve_lp()
        assert full is not None and lp.value == pytest.approx(full.value, rel=1e-7, abs=1e-9)
        assert (lazy.fit_row >= 0).sum() <= (eager.fit_row >= 0).sum()
        lazy.make_integer()
        assert (lazy.fit_row[lazy.x_stronger] >= 0).all()
