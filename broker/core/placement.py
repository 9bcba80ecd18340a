"""A placement as the broker keeps it: the solver's result and what was recorded around it.

Pure and frozen. This is the one shape the services hand around: the database
rows map onto it (broker.db.placement_models) and the response documents are
built from it (broker.placements.documents), so neither a renamed response field
nor a new column reaches the other side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from broker.core.domain import HOURS_PER_MONTH, Objective, PlacementResult


@dataclass(frozen=True, slots=True)
class PoolPrice:
    """The catalog price a provisioned pool was planned with."""

    price_per_hour: float
    source: str
    as_of: str  # ISO 8601
    stale: bool  # older than the snapshot's stale_after_days when the placement was made


@dataclass(frozen=True, slots=True)
class PriceSnapshot:
    catalog_version: str
    stale_after_days: float
    pools: Mapping[str, PoolPrice]  # pool id -> price, for the provisioned pools the catalog had

    @property
    def stale_pools(self) -> list[str]:
        return sorted(p for p, price in self.pools.items() if price.stale)


@dataclass(frozen=True, slots=True)
class BudgetFigure:
    """One budget the placement counted against, as it stood when the placement was made."""

    team: str | None  # None: the tenant-wide budget
    monthly_usd: float
    used: float
    this_placement: float
    projected: float
    remaining: float
    over: bool


@dataclass(frozen=True, slots=True)
class ResourceSizing:
    declared: float  # per replica
    forecast: float  # per replica, sized from the p95 forecast plus headroom
    p50_peak: float  # total across replicas
    p95_peak: float
    change_pct: float
    method: str  # "xgboost" | "fallback:..."
    forecaster: str | None = None  # the selected forecaster that sized it (docs/forecast.md)
    backtest_mae: float | None = None  # its error on the backtests before the forecast origin
    regime_shift: bool = False  # the series shifted regime, so a robust rule sized it


@dataclass(frozen=True, slots=True)
class WorkloadSizing:
    workload: str
    source: str  # "series:<name>" | "inline"
    model_version: int | None
    horizon_hours: float
    headroom_pct: float
    cpu: ResourceSizing | None = None
    memory_gib: ResourceSizing | None = None
    warnings: tuple[str, ...] = ()

    def resources(self) -> dict[str, ResourceSizing]:
        """metric -> sizing, for the metrics that were sized."""
        return {m: r for m, r in (("cpu", self.cpu), ("memory_gib", self.memory_gib)) if r is not None}


@dataclass(frozen=True, slots=True)
class SizingReport:
    """Declared vs forecast-sized requests, both priced."""

    workloads: tuple[WorkloadSizing, ...]
    declared_cost_per_hour: float | None  # None: the declared request fits nowhere
    cost_per_hour: float
    savings_per_hour: float | None
    savings_pct: float | None


@dataclass(frozen=True, slots=True)
class Placement:
    """A solved placement request: stored (with id and created_at) or a dry run (without)."""

    name: str
    tenant: str
    result: PlacementResult
    # the request document as validated (the public request contract); a replan solves it again
    request: Mapping[str, Any]
    id: str | None = None
    created_at: datetime | None = None  # UTC
    latency_quantile: str = "p50"  # the RTT statistic of every latency_ms and SLO margin
    price_as_of: Mapping[str, str] = field(default_factory=dict)  # provider -> newest price date used
    prices: PriceSnapshot | None = None
    rightsizing: SizingReport | None = None
    budget: tuple[BudgetFigure, ...] | None = None  # None: the tenant has no budget that applies

    def __post_init__(self) -> None:
        if self.prices is not None:
            provisioned = {n.pool for n in self.result.nodes}
            extra = sorted(set(self.prices.pools) - provisioned)
            if extra:  # the snapshot prices what was provisioned, nothing else
                raise ValueError(f"price snapshot of pools the placement does not provision: {extra}")

    @property
    def cost_per_month(self) -> float:
        return round(self.result.cost_per_hour * HOURS_PER_MONTH, 2)


@dataclass(frozen=True, slots=True)
class PlacementSummary:
    """One line of the placement list."""

    id: str
    name: str
    created_at: datetime
    status: str
    cost_per_hour: float
    baseline_cost_per_hour: float | None
    savings_pct: float | None


@dataclass(frozen=True, slots=True)
class TradeOff:
    """One point of a Pareto front: the weights that found it, its three measures, its placement."""

    weights: Objective
    cost_per_hour: float
    latency_ms: float  # replica-weighted mean RTT to the request's user regions
    carbon_kg_per_hour: float
    placement: Placement
