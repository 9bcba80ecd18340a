"""The savings and dashboard documents: money rounded once, from the domain figures."""

from __future__ import annotations

from datetime import UTC, datetime

from broker.finops.documents import FiguresOut, GroupOut, SavingsOut, SeriesPointOut
from broker.finops.ledger import Figures, GroupFigures, SeriesPoint
from broker.finops.service import SavingsReport

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_figures_are_rounded_and_savings_derived() -> None:
    f = FiguresOut.from_domain(Figures(3, 1.23456789, 2.0, 10.123456, 20.0))
    assert (f.cost_per_hour, f.baseline_cost_per_hour, f.savings_per_hour) == (1.234568, 2.0, 0.765432)
    assert f.savings_per_month == round(0.76543211 * 730, 2)
    assert (f.savings_pct, f.cost, f.savings) == (38.27, 10.1235, 9.8765)


def test_no_baseline_cost_means_no_savings_percentage() -> None:
    assert FiguresOut.from_domain(Figures(0, 0.0, 0.0, 0.0, 0.0)).savings_pct is None


def test_savings_document_keeps_the_contract_keys() -> None:
    report = SavingsReport(T0, T0.replace(day=2), None, "provider", Figures(1, 1.0, 2.0, 24.0, 48.0),
                           [GroupFigures("aws", Figures(1, 1.0, 2.0, 24.0, 48.0))])  # fmt: skip
    doc = SavingsOut.from_domain(report).model_dump(mode="json", by_alias=True)
    contract = {"from", "to", "tenant", "group_by", "currency", "totals", "groups"}
    assert set(doc) - contract == {"baselines"}  # the one extension: which baselines the figures name
    assert [b["policy"] for b in doc["baselines"]] == [
        "kubernetes-packer",
        "placement-in-force",
        "kubernetes-packer-home-cloud",
        "greedy-cheapest-fit",
    ]
    assert doc["from"] == "2026-11-01T00:00:00+00:00" and doc["currency"] == "USD"
    assert doc["groups"] == [GroupOut.from_group(report.groups[0]).model_dump(mode="json")]
    assert doc["groups"][0]["key"] == "aws" and doc["groups"][0]["savings_per_hour"] == 1.0


def test_series_point_savings_is_baseline_minus_cost() -> None:
    p = SeriesPointOut.from_domain(SeriesPoint(T0, 1.00001, 3.00031))
    assert (p.start, p.cost, p.baseline_cost, p.savings) == (T0.isoformat(), 1.0, 3.0003, 2.0003)


def test_the_greedy_figure_is_second_and_named_apart() -> None:
    # headline baseline 2.0/h, greedy 4.0/h, cost 1.0/h; one placement without a headline baseline
    f = FiguresOut.from_domain(Figures(3, 1.0, 2.0, 24.0, 48.0, 4.0, 96.0, 1))
    assert (f.savings_pct, f.greedy_savings_pct) == (50.0, 75.0)
    assert (f.greedy_baseline_cost_per_hour, f.greedy_baseline_cost, f.placements_without_baseline) == (4.0, 96.0, 1)
    assert f.greedy_savings_per_month == round(3.0 * 730, 2)
