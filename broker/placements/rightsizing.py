"""Forecast-driven sizing of a placement request (the hook Broker.place calls).

Workloads with `demand` get cpu/memory requests sized from the p95 forecast of their
usage plus headroom; the answer's `rightsizing` section compares them with the declared
requests and prices the declared request too, so the saving is a solved figure, not a
proportional guess.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from broker.core.placement import ResourceSizing, SizingReport, WorkloadSizing
from broker.errors import BrokerError, InvalidRequest
from broker.forecast.history import HistoryError, Panel, regularize
from broker.forecast.sizing import SizedResource, size
from broker.placements.request_documents import PlacementRequestIn
from broker.solver import PlacementProblem, SolverOptions, solve
from broker.usage.service import UsageStore

METRICS = ("cpu", "memory_gib")


@dataclass
class Rightsizing:
    workloads: list[WorkloadSizing]
    declared: PlacementRequestIn

    def section(
        self,
        problem: PlacementProblem,
        result_cost: float,
        time_limit_s: float,
        *,
        options: SolverOptions | None = None,
    ) -> SizingReport:
        declared_cost: float | None
        try:
            declared_problem = dataclasses.replace(problem, request=self.declared.to_domain())
            # only its cost is read: no baselines priced
            quiet = dataclasses.replace(options or SolverOptions(), price_baselines=False)
            declared = solve(declared_problem, time_limit_s=time_limit_s, options=quiet)
            declared_cost = declared.cost_per_hour if declared.status != "infeasible" else None
        except BrokerError:  # the declared request may not fit anywhere; the sized one did
            declared_cost = None
        saving = None if declared_cost is None else round(declared_cost - result_cost, 6)
        pct = round(saving / declared_cost * 100, 2) if saving is not None and declared_cost else None
        return SizingReport(
            workloads=tuple(self.workloads),
            declared_cost_per_hour=declared_cost,
            cost_per_hour=result_cost,
            savings_per_hour=saving,
            savings_pct=pct,
        )


def _inline_panel(name: str, values: list[float], step_s: int) -> Panel:
    frame = pd.DataFrame(
        {"series_id": name, "ts": np.arange(len(values), dtype=np.int64) * step_s, "value": values}
    ).assign(metric="x")
    return regularize(frame, step_s=step_s)


def _out(r: SizedResource) -> ResourceSizing:
    return ResourceSizing(
        declared=r.declared,
        forecast=r.forecast,
        p50_peak=r.p50_peak,
        p95_peak=r.p95_peak,
        change_pct=round(r.change_pct, 2),
        method=r.method,
        forecaster=r.forecaster or None,
        backtest_mae=r.backtest_mae,
        regime_shift=r.regime_shift,
    )


def apply_demand(
    store: UsageStore, req: PlacementRequestIn, *, tenant: str = "default"
) -> tuple[PlacementRequestIn, Rightsizing | None]:
    """(request with sized workloads, sizing report) or (req, None) when no workload has demand."""
    if not any(getattr(w, "demand", None) for w in req.workloads):
        return req, None
    sized_workloads = []
    reports = []
    errors: list[dict[str, Any]] = []
    for i, w in enumerate(req.workloads):
        demand = getattr(w, "demand", None)
        if demand is None:
            sized_workloads.append(w)
            continue
        horizon = max(1, round(demand.horizon_hours * 3600 / demand.step_seconds))
        sized_by_metric: dict[str, ResourceSizing] = {}
        model_version: int | None = None
        warnings: list[str] = []
        update: dict[str, float] = {}
        for metric in METRICS:
            try:
                if demand.series is not None:
                    panel = store.history([demand.series], metric, tenant=tenant)
                elif demand.history and metric in demand.history:
                    panel = _inline_panel(w.name, demand.history[metric], demand.step_seconds)
                else:
                    panel = None
            except HistoryError as exc:
                errors.append({"loc": ["body", "workloads", i, "demand"], "msg": exc.detail})
                continue
            if panel is None:
                continue
            version, forecasts = store.forecast(panel, metric=metric, horizon=horizon, tenant=tenant)
            f = forecasts[0]
            declared = float(w.cpu if metric == "cpu" else w.memory_gib)
            sized = size(
                metric,
                declared=declared,
                replicas=w.replicas,
                p50=f.p50,
                p95=f.p95,
                headroom_pct=demand.headroom_pct,
                method=f.method,
                only_downsize=demand.only_downsize,
                forecaster=f.forecaster,
                backtest_mae=f.backtest_mae,
                regime_shift=f.regime_shift,
            )
            sized_by_metric[metric] = _out(sized)
            model_version = version if f.method == "xgboost" else model_version
            if f.method != "xgboost":
                warnings.append(f"{metric}: {f.method} (no trained model or too little history)")
            update[metric] = sized.forecast
        if demand.series is not None and not update:
            errors.append(
                {"loc": ["body", "workloads", i, "demand", "series"], "msg": f"no usage stored for {demand.series!r}"}
            )
        sized_workloads.append(w.model_copy(update=update))
        reports.append(
            WorkloadSizing(
                workload=w.name,
                source=f"series:{demand.series}" if demand.series else "inline",
                model_version=model_version,
                horizon_hours=demand.horizon_hours,
                headroom_pct=demand.headroom_pct,
                cpu=sized_by_metric.get("cpu"),
                memory_gib=sized_by_metric.get("memory_gib"),
                warnings=tuple(warnings),
            )
        )
    if errors:
        raise InvalidRequest("demand history cannot size the workloads", errors=errors)
    return req.model_copy(update={"workloads": sized_workloads}), Rightsizing(reports, req)
