"""Domain placements for tests that need one without solving."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from broker.core.domain import Assignment, Baseline, Explanation, NodeAllocation, PlacementResult
from broker.core.placement import Placement


def assignment(
    workload: str,
    pool: str,
    replicas: int,
    cost: float = 1.0,
    *,
    breakdown: Mapping[str, float] | None = None,
    binding: Sequence[str] = (),
    latency_ms: Mapping[str, float] | None = None,
    margins: Mapping[str, float] | None = None,
) -> Assignment:
    return Assignment(
        workload=workload,
        pool=pool,
        site=pool.split("/", 1)[0],
        replicas=replicas,
        latency_ms=dict(latency_ms or {}),
        explanation=Explanation(
            cost_per_hour=cost, binding=tuple(binding), next_best=None, cost_breakdown=dict(breakdown or {})
        ),
        latency_slo_margin_ms=dict(margins or {}),
    )


def placement(
    assignments: Sequence[Assignment],
    *,
    nodes: Sequence[tuple[str, int, float]] = (),
    request: Mapping[str, Any] | None = None,
    id: str | None = "pl_TEST",
    name: str = "test",
    tenant: str = "default",
    created_at: datetime | None = None,
    cost_per_hour: float | None = None,
    baseline_cost_per_hour: float | None = None,
    greedy_cost_per_hour: float | None = None,
    egress_cost_per_hour: float = 0.0,
) -> Placement:
    """A placement of these assignments (and nodes: pool, count, cost); its cost defaults to theirs."""
    cost = cost_per_hour if cost_per_hour is not None else sum(a.explanation.cost_per_hour for a in assignments)
    result = PlacementResult(
        status="optimal",
        objective_value=cost,
        cost_per_hour=cost,
        lower_bound_per_hour=cost,
        gap_pct=0.0,
        baseline=Baseline("kubernetes-packer", baseline_cost_per_hour),
        savings_pct=None,
        solve_ms=1,
        nodes=tuple(NodeAllocation(p, n, c) for p, n, c in nodes),
        assignments=tuple(assignments),
        egress_cost_per_hour=egress_cost_per_hour,
        baselines=(
            Baseline("kubernetes-packer", baseline_cost_per_hour),
            Baseline("greedy-cheapest-fit", greedy_cost_per_hour),
        ),
    )
    return Placement(name=name, tenant=tenant, result=result, request=dict(request or {}), id=id, created_at=created_at)
