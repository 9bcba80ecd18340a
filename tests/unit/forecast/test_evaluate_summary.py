"""`broker forecast evaluate`'s summary names the fixed rule its own table shows best and says
how far the selected forecaster's p95 coverage is from the 95 % it promises (issue 39)."""

from __future__ import annotations

import pytest

from broker.forecast.evaluate import Scores, best_fixed_rule, coverage_note
from broker.forecast.rolling import FIXED_RULES


def _scores(**mae: float) -> dict[str, Scores]:
    return {name: Scores(mae=m, smape=10.0, p95_coverage=95.0, points=100) for name, m in mae.items()}


def test_the_best_fixed_rule_is_the_lowest_mae_of_all_the_table_shows() -> None:
    # the table: weekly_median was named "the better fixed rule" at 2.7053 against 2.3378
    scores = _scores(
        selected=2.4,
        xgboost=2.0,  # not a fixed rule, however good
        seasonal_naive=3.3,
        weekly_median=2.7053,
        blend_yday_weekly=2.9,
        median_last_week=2.3378,
        median_last_2_weeks=2.5,
    )
    assert best_fixed_rule(scores, FIXED_RULES) == "median_last_week"


@pytest.mark.parametrize(
    ("coverage", "said"),
    [
        (79.6, "79.6 % (promised 95 %): 15.4 points below"),
        (99.5, "99.5 % (promised 95 %): 4.5 points above"),
        (94.6, "94.6 % (promised 95 %: met, within 90-98 %)"),
    ],
)
def test_coverage_is_said_against_the_promise(coverage: float, said: str) -> None:
    assert said in coverage_note(coverage)
