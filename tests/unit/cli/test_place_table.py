"""`broker place`'s table at 80 columns: the instance and capacity types stay whole (the site
folds instead), the binding constraints follow once per workload, and a month is money at cents."""

from __future__ import annotations

import io
import re
from typing import Any

from rich.console import Console

from broker.cli.render import render_markdown, render_table, split_pool

POOLS = [
    ("checkout-api", "aws:eu-south-1/t3a.2xlarge/spot", 3, 0.0591),
    ("checkout-api-with-a-long-name", "azure:germanywestcentral/Standard_D16as_v5/ondemand", 2, 1.3),
    ("orders-db", "gcp:europe-west3/n2d-highmem-8/reserved", 1, 0.2948),
]


def _doc() -> dict[str, Any]:
    assignments = [
        {
            "workload": w,
            "pool": pool,
            "site": pool.split("/")[0],
            "replicas": n,
            "latency_ms": {},
            "explanation": {
                "cost_per_hour": cost,
                "binding": [f"spread.min_sites>=2 on {w}", f"capacity_types:[ondemand,reserved] on {w}"],
            },
        }
        for w, pool, n, cost in POOLS
    ]
    return {
        "name": "checkout rollout",
        "status": "optimal",
        "cost_per_hour": 0.70822,
        "cost_per_month": 517.0006,
        "lower_bound_per_hour": 0.70822,
        "gap_pct": 0.0,
        "baseline": {"policy": "kubernetes-packer", "cost_per_hour": 0.9093},
        "savings_pct": 22.11,
        "solve_ms": 238,
        "assignments": assignments,
    }


def _render(width: int) -> str:
    buf = io.StringIO()
    render_table(Console(file=buf, width=width, color_system=None), _doc())
    return buf.getvalue()


def test_at_80_columns_every_instance_and_capacity_type_is_whole_on_its_row() -> None:
    text = _render(80)
    assert max(len(line) for line in text.splitlines() if line.startswith(("│", "┃"))) <= 80
    for _, pool, _, _ in POOLS:
        _, instance, capacity = split_pool(pool)
        rows = [line for line in text.splitlines() if f" {instance} " in line]
        assert rows and any(f" {capacity} " in row for row in rows), (instance, text)
        assert "…" not in text


def test_binding_constraints_follow_the_table_once_per_workload() -> None:
    text = _render(80)
    assert "orders-db bound by: spread.min_sites>=2, capacity_types:[ondemand,reserved]" in text


def test_a_month_is_money_at_cents_and_an_hour_at_four_decimals() -> None:
    text = _render(120)
    assert "cost $0.7082/h ($517.00/month)" in text
    assert not re.search(r"\$\d+\.\d{3,}/month", text)
    md = render_markdown(_doc())
    assert "| $0.7082 | $517.00 |" in md


def test_a_pool_id_splits_into_site_instance_and_capacity() -> None:
    assert split_pool("private:fra-dc1/gp.large/ondemand") == ("private:fra-dc1", "gp.large", "ondemand")
    assert split_pool("odd") == ("odd", "", "")
