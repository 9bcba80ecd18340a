"""The restricted master's HiGHS handling."""

from __future__ import annotations

import numpy as np

from broker.solver.master import Master
from broker.solver.model import make_layout
from broker.solver.search import _columns_of
from broker.solver.universe import make_universe

from .test_bound import _case


def test_a_later_lp_round_gets_its_own_time_limit() -> None:
    """HiGHS counts an LP's time limit over every run() of the model: without adding the run time
    so far, a round given 0.05 s after 0.1 s of earlier rounds stops at once, unsolved."""
    mi, starts, _lp, _opt = _case(0)
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    m = Master(mi, lay, uni)
    m.add_columns(_columns_of(starts[0], uni.cols))  # a feasible start
    while m.h.getRunTime() < 0.1:
        assert m.solve_lp() is not None
    m.add_columns(np.arange(uni.size))  # the next round has work to do
    again = m.solve_lp(time_limit_s=0.05)
    assert again is not None
