"""Spot interruption risk: an estimate per spot pool and the risk-adjusted cost beside list cost.

No public feed of interruption rates ships with the catalog, so the estimate is a documented
heuristic: the providers' published typical monthly interruption frequencies (AWS Spot
Instance Advisor: most types under 5 %; Azure eviction-rate buckets commonly 5-10 %; GCP Spot:
no guarantee, preemption more frequent in busy zones) scaled up for large nodes, which are
reclaimed more often. The risk-adjusted cost prices each expected interruption as a month's
surcharge of that share: list cost x (1 + risk).
"""

from __future__ import annotations

import math

BASE_MONTHLY_RISK = {"aws": 0.05, "azure": 0.08, "gcp": 0.10}
DEFAULT_MONTHLY_RISK = 0.10
MAX_MONTHLY_RISK = 0.5


def interruption_risk_month(provider: str, vcpus: float) -> float:
    """Estimated probability that a spot node of this size is interrupted within a month."""
    base = BASE_MONTHLY_RISK.get(provider, DEFAULT_MONTHLY_RISK)
    return min(MAX_MONTHLY_RISK, base * (1.0 + math.log2(max(vcpus, 1.0)) / 8.0))


def risk_adjusted(cost_per_hour: float, risk_month: float) -> float:
    return cost_per_hour * (1.0 + risk_month)
