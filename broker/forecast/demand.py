"""Request and response parts of forecast-driven sizing (`workloads[].demand`, `rightsizing`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from broker.core.placement import ResourceSizing, SizingReport, WorkloadSizing

Usage = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
Metric = Literal["cpu", "memory_gib"]


class DemandIn(BaseModel):
    """Where a workload's usage comes from: a stored series, or inline history on a regular grid.

    Values are the workload's total usage across replicas: `cpu` in cores, `memory_gib` in GiB.
    """

    model_config = ConfigDict(extra="forbid")

    series: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    history: dict[Metric, Annotated[list[Usage], Field(min_length=1, max_length=100_000)]] | None = None
    # strict like the rest of the request document (broker/placements/request_documents.py)
    step_seconds: Annotated[int, Strict()] = Field(300, ge=10, le=86_400)
    headroom_pct: Annotated[float, Strict()] = Field(20.0, ge=0, le=400)
    horizon_hours: Annotated[float, Strict()] = Field(24.0, gt=0, le=24 * 14)
    only_downsize: Annotated[bool, Strict()] = False

    @model_validator(mode="after")
    def _one_source(self) -> DemandIn:
        if (self.series is None) == (self.history is None):
            raise ValueError("give either series (a stored usage series) or history (inline values)")
        if self.history is not None and not self.history:
            raise ValueError("history needs at least one metric (cpu or memory_gib)")
        return self


class ResourceSizingOut(BaseModel):
    declared: float
    forecast: float
    p50_peak: float
    p95_peak: float
    change_pct: float
    method: str
    # extension (docs/forecast.md): which forecaster sized it and how it did on the recent backtests
    # left out when unset, so placements sized before the selected forecaster read back exactly as stored
    forecaster: str | None = Field(None, exclude_if=lambda v: v is None)
    backtest_mae: float | None = Field(None, exclude_if=lambda v: v is None)
    regime_shift: bool = Field(
        False, exclude_if=lambda v: not v, description="present (true) when the series shifted regime"
    )

    @classmethod
    def from_domain(cls, r: ResourceSizing) -> ResourceSizingOut:
        return cls.model_validate(r, from_attributes=True)


class WorkloadSizingOut(BaseModel):
    workload: str
    source: str
    model_version: int | None
    horizon_hours: float
    headroom_pct: float
    cpu: ResourceSizingOut | None = None
    memory_gib: ResourceSizingOut | None = None
    warnings: list[str] = Field(default_factory=list)

    @classmethod
    def from_domain(cls, w: WorkloadSizing) -> WorkloadSizingOut:
        return cls.model_validate(w, from_attributes=True)


class RightsizingOut(BaseModel):
    """Declared vs forecast requests, and what sizing from the forecast saves."""

    workloads: list[WorkloadSizingOut]
    declared_cost_per_hour: float | None
    cost_per_hour: float
    savings_per_hour: float | None
    savings_pct: float | None

    @classmethod
    def from_domain(cls, r: SizingReport) -> RightsizingOut:
        return cls(
            workloads=[WorkloadSizingOut.from_domain(w) for w in r.workloads],
            declared_cost_per_hour=r.declared_cost_per_hour,
            cost_per_hour=r.cost_per_hour,
            savings_per_hour=r.savings_per_hour,
            savings_pct=r.savings_pct,
        )
