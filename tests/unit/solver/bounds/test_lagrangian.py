"""The catalog-wide Lagrangian bound (bounds/lagrangian.py) against proven optima.

The rounds come from the real column generation of the search, with the bound computed from
each round's duals (a spy on the reduced-cost pass).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from broker.solver import SolverOptions
from broker.solver.bounds.lagrangian import lagrangian_bound, lagrangian_bound_detail
from broker.solver.bounds.node_share import node_share_bound
from broker.solver.model import reduced_costs
from broker.solver.model.layout import ModelInput
from broker.solver.model.master import Master
from broker.solver.model.reduced_costs import ColumnCosts, column_reduced_costs
from broker.solver.model.universe import Universe
from broker.solver.search import SearchResult, search
from broker.solver.types import ClassPlacement

from ..support.cases import CASES, case


@dataclasses.dataclass
class _Round:
    z_lp: float
    bound: float
    others: list[float]  # bounds from perturbed multipliers (when asked for)


def _rounds(
    mi: ModelInput,
    starts: list[ClassPlacement],
    monkeypatch: pytest.MonkeyPatch,
    perturb: int = 0,
    loose: bool = False,
    max_rounds: int = 200,
) -> tuple[list[_Round], SearchResult | None]:
    """Run the real column generation; the bound from every round's duals (and from
    `perturb` random distortions of them: scaled, shifted, of either sign). loose: in two
    phases, fit rows capped only once the first phase converged (as on big requests)."""
    out: list[_Round] = []
    real = column_reduced_costs
    rng = np.random.default_rng(0)

    def spy(mi_: ModelInput, uni: Universe, m: Master, row_dual: np.ndarray) -> ColumnCosts:
        z = float(m.h.getInfo().objective_function_value)
        others = []
        col_dual = np.asarray(m.h.getSolution().col_dual)
        for _ in range(perturb):
            y = row_dual * rng.uniform(0.0, 2.0, len(row_dual)) + rng.normal(0.0, 0.05, len(row_dual))
            cd = col_dual + rng.normal(0.0, 0.05, len(col_dual))
            others.append(lagrangian_bound_detail(mi_, uni, m, y, cd).value)
        out.append(_Round(z, lagrangian_bound(mi_, uni, m, row_dual), others))
        return real(mi_, uni, m, row_dual)

    # the aggregate model's LP, which the case's full LP and optimum are: no pattern cuts
    opts = SolverOptions(
        loose_fit_min_cols=-1 if loose else 10**12,
        max_cg_rounds=max_rounds,
        pattern_cut_rounds=0,
        pattern_cut_mip_rounds=0,
    )
    with monkeypatch.context() as mp:
        mp.setattr(reduced_costs, "column_reduced_costs", spy)
        res = search(mi, starts=starts, time_limit_s=20, seed=0, options=opts)
    return out, res


@pytest.mark.slow
@pytest.mark.parametrize("loose", [False, True])
@pytest.mark.parametrize("seed", list(CASES))
def test_bound_is_valid_in_every_round_of_unfinished_column_generation(
    seed: int, loose: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    mi, starts, _, opt = case(seed)
    assert mi.classes and len(mi.keep_class) and any(c.min_sites > 1 for c in mi.classes)
    full, _ = _rounds(mi, starts, monkeypatch, loose=loose)
    assert len(full) >= 2  # round 1 found columns to add: unfinished
    for max_rounds in (1, 2, 3):
        rounds, res = _rounds(mi, starts, monkeypatch, loose=loose, max_rounds=max_rounds)
        assert res is not None and len(rounds) == min(max_rounds, len(full))
        for r in rounds:
            assert r.bound <= opt + 1e-7 * max(1.0, abs(opt)), (max_rounds, r.bound, opt)
    first = _rounds(mi, starts, monkeypatch, max_rounds=1)[0][0]
    assert math.isfinite(first.bound) and first.bound > 0


@pytest.mark.slow
@pytest.mark.parametrize("loose", [False, True])
@pytest.mark.parametrize("seed", list(CASES))
def test_bound_reaches_the_lp_when_column_generation_converges(
    seed: int, loose: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    mi, starts, full_lp, opt = case(seed)
    rounds, res = _rounds(mi, starts, monkeypatch, loose=loose)
    assert res is not None and res.proven
    last = rounds[-1]
    assert last.z_lp == pytest.approx(full_lp, rel=1e-6)
    assert last.bound <= opt + 1e-7
    # the restricted master counts a pool in a spread class's node row only once that class's
    # column on it is in: the LP's duals can then over-credit such pools (see bound.py)
    assert last.bound >= last.z_lp * (1 - 0.01)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 3])
def test_bound_equals_the_lp_at_convergence_without_spread(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    mi, starts, full_lp, opt = case(seed, spread=False)
    rounds, res = _rounds(mi, starts, monkeypatch)
    assert res is not None and res.proven
    assert rounds[-1].bound == pytest.approx(full_lp, rel=1e-7)
    assert rounds[-1].bound <= opt + 1e-7


def test_any_multipliers_give_a_valid_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity does not rest on the duals being optimal, or even of the right sign."""
    mi, starts, _, opt = case(2)
    rounds, _ = _rounds(mi, starts, monkeypatch, perturb=15)
    others = [v for r in rounds for v in r.others]
    assert len(others) >= 30 and any(math.isfinite(v) for v in others)
    assert max(others) <= opt + 1e-7, (max(others), opt)


def test_bound_beats_the_fallbacks_once_the_lp_has_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    mi, starts, _, _ = case(0)
    rounds, _ = _rounds(mi, starts, monkeypatch, max_rounds=3)
    assert rounds[-1].bound > node_share_bound(mi)
