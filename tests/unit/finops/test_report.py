"""The pull-request comment: diff against the stored placement, residency, latency and cost-gate checks."""

from __future__ import annotations

from typing import Any

import pytest

from broker.cli.render import diff_lines, gate_lines, latency_lines, render_markdown, residency_lines
from broker.core.domain import Site, SiteKind

SITES = {
    "aws:eu-central-1": Site("aws:eu-central-1", "aws", SiteKind.PUBLIC, "eu-central-1", "DE", ("EU", "EEA"), 50, 8),
    "aws:us-east-1": Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38, -77),
}


def _assignment(workload: str, pool: str, replicas: int, cost: float, rtt: float) -> dict[str, Any]:
    return {
        "workload": workload,
        "pool": pool,
        "site": pool.split("/")[0],
        "replicas": replicas,
        "latency_ms": {"eu-users": rtt},
        "explanation": {"cost_per_hour": cost, "binding": [], "next_best": None},
    }


def _doc(assignments: list[dict[str, Any]], cost: float) -> dict[str, Any]:
    return {
        "id": "pl_new",
        "name": "svc",
        "status": "optimal",
        "cost_per_hour": cost,
        "lower_bound_per_hour": cost,
        "gap_pct": 0.0,
        "baseline": {"policy": "greedy-cheapest-fit", "cost_per_hour": cost * 2},
        "savings_pct": 50.0,
        "nodes": [],
        "assignments": assignments,
    }


EU = "aws:eu-central-1/m6i.large/spot"
US = "aws:us-east-1/m6i.large/ondemand"
OLD = _doc([_assignment("api", EU, 2, 0.2, 10.0)], 0.2)
NEW = _doc([_assignment("api", EU, 1, 0.1, 10.0), _assignment("api", US, 2, 0.3, 90.0)], 0.4)
REQUEST = {"workloads": [{"name": "api", "residency": "gdpr-eu", "latency_slo_ms": {"eu-users": 40}}]}


def test_diff_names_what_moved_per_workload_and_pool() -> None:
    text = "\n".join(diff_lines(NEW, OLD))
    assert f"| changed | api | `{EU}` | 2 → 1 | -$0.1000 |" in text
    assert f"| added | api | `{US}` | 0 → 2 | +$0.3000 |" in text
    assert "No change" in "\n".join(diff_lines(OLD, OLD))


def test_residency_and_latency_checks_flag_the_offending_site() -> None:
    res = "\n".join(residency_lines(NEW, REQUEST, SITES))
    assert "❌ outside the policy: aws:us-east-1" in res and "aws:us-east-1 (US)" in res
    assert "✅ pass" in "\n".join(residency_lines(OLD, REQUEST, SITES))
    assert "enforced by the server" in "\n".join(residency_lines(OLD, REQUEST, None))
    lat = "\n".join(latency_lines(NEW, REQUEST))
    assert "| api | eu-users | ≤ 40 ms | 90 ms | ❌ fail |" in lat
    assert "✅ pass" in "\n".join(latency_lines(OLD, REQUEST))


@pytest.mark.parametrize(
    ("max_cost", "max_inc", "expected"),
    [
        (0.5, None, ["✅ pass"]),
        (0.3, None, ["❌ over"]),
        (None, 150.0, ["+100.0%", "✅ pass"]),
        (None, 50.0, ["+100.0%", "❌ over"]),
        (None, None, []),
    ],
)
def test_cost_gate(max_cost: float | None, max_inc: float | None, expected: list[str]) -> None:
    text = "\n".join(gate_lines(NEW, OLD, max_cost_per_hour=max_cost, max_increase_pct=max_inc))
    assert all(e in text for e in expected)
    assert bool(text) == bool(expected)


def test_whole_comment() -> None:
    md = render_markdown(NEW, previous=OLD, request=REQUEST, sites=SITES, max_cost_per_hour=1.0)
    for heading in ("### Placement `svc`", "Against stored placement `pl_new`", "**Cost gate**", "**Residency**",
                    "**Latency SLOs**", "**Plan**"):  # fmt: skip
        assert heading in md
    assert "+100.0%" in md and "$292.00" in md  # +0.2 USD/h = +146/month; cost 0.4 * 730 = 292
    first = render_markdown(OLD)
    assert "No stored placement of this name yet" in first and "**Residency**" not in first


def test_the_comment_names_the_baseline_and_the_second_figure() -> None:
    doc = {
        **NEW,
        "baseline": {"policy": "kubernetes-packer", "cost_per_hour": 0.8},
        "baselines": [
            {"policy": "kubernetes-packer", "cost_per_hour": 0.8, "savings_pct": 50.0},
            {"policy": "greedy-cheapest-fit", "cost_per_hour": 1.6, "savings_pct": 75.0},
        ],
    }
    md = render_markdown(doc)
    assert "Baseline: `kubernetes-packer`; `greedy-cheapest-fit` $1.6000/h (75.0%)" in md
    assert "Baseline: `greedy-cheapest-fit`" in render_markdown(OLD)  # a document without the extension
