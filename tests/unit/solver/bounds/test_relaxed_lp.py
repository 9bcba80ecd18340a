"""The node-share bound priced by its relaxation's LP (bounds/relaxed_lp.py): exact where the
floors are, valid wherever column generation stops."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest

from broker.solver import ShareBoundOptions, SolverOptions
from broker.solver.bounds import relaxed_lp
from broker.solver.bounds.node_share import node_share_bound
from broker.solver.model.layout import ModelInput, make_layout
from broker.solver.model.reduced_costs import ReducedCosts
from broker.solver.model.universe import make_universe
from broker.solver.search import column_generation, search
from broker.solver.search.column_generation import initial_columns
from broker.solver.search.placements import columns_of
from broker.solver.types import ClassPlacement, EgressColumns

from ..support.cases import CASES, CPU_MEM_SPOT_SPREAD, case, kept_rows_lp, search_input_of
from ..support.catalog import problem


def _relaxed(
    mi: ModelInput,
    starts: list[ClassPlacement],
    *,
    egress: bool = True,
    rounds: int = ShareBoundOptions().rounds,
    cg_s: float = 60.0,
) -> float:
    """relaxed_bound from the columns search() starts with (the start placements make the first
    LP feasible)."""
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    first = np.concatenate([initial_columns(mi, uni)] + [columns_of(x, uni.cols) for x in starts])
    now = time.perf_counter()
    return relaxed_lp.relaxed_lp_bound(
        mi, lay, uni, first, cg_until=now + cg_s, until=now + cg_s + 10.0,
        egress=EgressColumns.of(lay) if egress else None, rounds=rounds,
    )  # fmt: skip


def test_the_relaxed_lps_prices_give_its_value_before_any_ascent() -> None:
    """Where every floor is exact (no class with both a spot cap and spread), the floors at the
    converged relaxed LP's prices are that LP's value (Lagrangian duality): the ascent has nothing
    left to find. A single split for all pools stays 2 % below it."""
    mi, starts = search_input_of(problem(CPU_MEM_SPOT_SPREAD))
    kept = kept_rows_lp(mi)
    at_prices = _relaxed(mi, starts, egress=False, rounds=0)
    assert node_share_bound(mi, rounds=0) < 0.98 * kept
    # float32 prices rounded down: 5e-8 below
    assert kept * (1 - 1e-6) <= at_prices <= kept + 1e-7, (at_prices, kept)


@pytest.mark.slow
@pytest.mark.parametrize("spread", [True, False])
@pytest.mark.parametrize("seed", [*CASES, 5, 8])
def test_the_relaxed_bound_never_exceeds_the_full_lp(seed: int, spread: bool) -> None:
    """Spot caps, spread, residency, a dependency pair and a running placement: whatever the
    relaxed LP's prices, the floors and the pairs' egress stay below the full LP."""
    mi, starts, full_lp, _ = case(seed, spread=spread)
    bound = _relaxed(mi, starts)
    assert 0 < bound <= full_lp + 1e-7, (bound, full_lp)


@pytest.mark.slow
@pytest.mark.parametrize("stop_after", [1, 2, 3])
@pytest.mark.parametrize("seed", list(CASES))
def test_prices_from_unfinished_column_generation_still_give_a_valid_bound(
    seed: int, stop_after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Column generation stopped after a few rounds (its prices far from the LP's): the bound
    holds, since any prices that charge no more than a node costs are valid multipliers."""
    mi, starts, full_lp, _ = case(seed)
    real = relaxed_lp.reduced_costs_at
    calls = [0]

    def stopping(*args: object) -> ReducedCosts:
        out = real(*args)  # type: ignore[arg-type]
        calls[0] += 1
        if calls[0] >= stop_after:  # as if the time were up
            out.new_pool[:] = False
            out.neg_cols[:] = False
        return out

    monkeypatch.setattr(relaxed_lp, "reduced_costs_at", stopping)
    bound = _relaxed(mi, starts)
    assert 0 < bound <= full_lp + 1e-7, (bound, full_lp)


def test_column_generation_ends_once_its_lp_stops_falling(monkeypatch: pytest.MonkeyPatch) -> None:
    """A degenerate tail (rounds that add columns without moving the LP: 3,000 workloads, three
    rounds at 1,325.1412 $/h) is cut when the value falls by less than STALLED, not run to the
    deadline beside the main column generation."""
    mi, starts, full_lp, _ = case(0)
    real = relaxed_lp.reduced_costs_at
    calls = [0]

    def never_done(*args: object) -> ReducedCosts:
        out = real(*args)  # type: ignore[arg-type]
        calls[0] += 1
        out.new_pool = np.ones(1, dtype=bool)  # as if columns still priced below the LP
        return out

    monkeypatch.setattr(relaxed_lp, "reduced_costs_at", never_done)
    monkeypatch.setattr(relaxed_lp, "entering", lambda *a: np.zeros(0, dtype=np.int64))
    started = time.perf_counter()
    bound = _relaxed(mi, starts, cg_s=60.0)
    assert calls[0] == 2 and time.perf_counter() - started < 30
    assert 0 < bound <= full_lp + 1e-7


def test_no_time_for_column_generation_falls_back_to_the_share_bound() -> None:
    mi, starts, full_lp, _ = case(0)
    bound = _relaxed(mi, starts, cg_s=-1.0)
    assert 0 < bound <= full_lp + 1e-7
    assert math.isclose(bound, node_share_bound(mi, egress=EgressColumns.of(make_layout(mi))), rel_tol=1e-2)


def test_search_runs_the_relaxed_bound_beside_column_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    """On big requests (here: any) the bound of an unfinished search comes from the relaxed LP's
    prices, started with column generation; it stays below the optimum."""
    mi, starts, _, opt = case(2)
    seen: list[float] = []
    real = relaxed_lp.relaxed_lp_bound

    def spy(*args: object, **kw: object) -> float:
        seen.append(real(*args, **kw))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(column_generation, "relaxed_lp_bound", spy)
    opts = SolverOptions(relaxed_min_cols=-1, max_cg_rounds=1)
    res = search(mi, starts=starts, time_limit_s=10, seed=0, options=opts)
    assert res is not None and not res.proven
    assert len(seen) == 1
    assert res.lower_bound == pytest.approx(min(seen[0], res.objective), rel=1e-8)
    assert 0 < res.lower_bound <= opt + 1e-7
    np.testing.assert_array_less(res.lower_bound, res.objective + 1e-9)


def test_once_the_search_needs_no_bound_the_thread_stops() -> None:
    """Set before column generation: no bound (-inf) and no LP solved; set before the ascent: the
    bound at the starting split, as with no ascent rounds."""
    mi, _, _, _ = case(0)
    stop = threading.Event()
    stop.set()
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    now = time.perf_counter()
    first = initial_columns(mi, uni)
    assert relaxed_lp.relaxed_lp_bound(mi, lay, uni, first, cg_until=now + 60, until=now + 70, stop=stop) == -math.inf
    assert node_share_bound(mi, stop=stop) == node_share_bound(mi, rounds=0) < node_share_bound(mi)


def test_a_converged_search_tells_the_relaxed_bound_to_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    mi, starts, _, _ = case(2)
    events: list[threading.Event] = []
    real = relaxed_lp.relaxed_lp_bound

    def spy(*args: object, **kw: object) -> float:
        events.append(kw["stop"])  # type: ignore[arg-type]
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(column_generation, "relaxed_lp_bound", spy)
    res = search(mi, starts=starts, time_limit_s=60, seed=0, options=SolverOptions(relaxed_min_cols=-1))
    assert res is not None and res.proven
    assert len(events) == 1 and events[0].is_set()
