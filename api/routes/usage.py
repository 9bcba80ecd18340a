"""Usage history of workloads and their demand forecasts."""

from __future__ import annotations

from typing import Annotated, Any

import pandas as pd
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_broker, get_tenant
from api.uploads import csv_or_json_body, json_document, read_upload
from broker.app import Broker
from broker.errors import InvalidRequest, NotFound
from broker.usage.service import UsageStore, read_csv

router = APIRouter(prefix="/v1", tags=["usage"])
_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}


class UsageSampleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field ("metrc") is an error, not a cpu sample

    timestamp: int | float | str
    value: float | str
    metric: str = "cpu"


class UsageDocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    samples: list[UsageSampleIn] = Field(min_length=1, max_length=500_000)


_BODY = csv_or_json_body(UsageDocumentIn, "timestamp,value,metric\n1700000000,1.5,cpu\n")


def _frame_from_body(raw: bytes, is_csv: bool) -> pd.DataFrame:
    if is_csv:
        frame = read_csv(raw)
        return frame.assign(series_id="-") if "series_id" not in frame.columns else frame
    doc = json_document(UsageDocumentIn, raw, "the usage document")
    return pd.DataFrame([s.model_dump() for s in doc.samples]).assign(series_id="-")


@router.post(
    "/workloads/{name}/usage",
    status_code=201,
    openapi_extra=_BODY,
    responses={422: {"description": "invalid samples (rows named in errors)", **_PROBLEM}},
)
async def post_usage(
    name: str,
    request: Request,
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
) -> dict[str, Any]:
    """Store usage samples of one workload: JSON `{"samples": [{"timestamp", "value", "metric"}]}` or
    CSV `timestamp,value[,metric]` (Unix seconds or ISO 8601; metric `cpu` cores or `memory_gib`).
    A sample window that was stored before is replaced; an invalid body stores nothing."""
    if not 1 <= len(name) <= 200:
        raise InvalidRequest("invalid workload name", errors=[{"loc": ["path", "name"], "msg": "1-200 chars"}])
    frame = _frame_from_body(*await read_upload(request))
    summary = UsageStore(broker.sessions).import_frame(frame, tenant=tenant, series=name)
    return {"workload": name, **summary.as_dict()}


@router.get("/workloads/{name}/usage", responses={404: _PROBLEM})
def get_usage(
    name: str, broker: Annotated[Broker, Depends(get_broker)], tenant: Annotated[str, Depends(get_tenant)]
) -> dict[str, Any]:
    """Samples stored per metric, with the first and last timestamp."""
    return UsageStore(broker.sessions).series_summary(name, tenant=tenant)


@router.get("/workloads/{name}/forecast", responses={404: _PROBLEM})
def get_forecast(
    name: str,
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
    metric: str = "cpu",
    horizon: Annotated[int, Query(ge=1, le=4032)] = 288,
) -> dict[str, Any]:
    """p50/p95 for the next `horizon` 5-minute steps from the tenant's newest model's selected
    forecaster (baseline without one)."""
    store = UsageStore(broker.sessions)
    panel = store.history([name], metric, tenant=tenant)
    if panel is None:
        raise NotFound(f"no {metric!r} usage stored for {name!r}")
    version, forecasts = store.forecast(panel, metric=metric, horizon=horizon, tenant=tenant)
    f = forecasts[0]
    start = panel.starts[0] + len(panel.values[0]) * panel.step_s
    return {
        "workload": name,
        "metric": metric,
        "model_version": version,
        "method": f.method,
        # extension (docs/forecast.md): the selected forecaster and its recent backtest error
        "forecaster": f.forecaster or f.method,
        "backtest_mae": None if f.backtest_mae is None else round(f.backtest_mae, 4),
        "regime_shift": f.regime_shift,
        "step_seconds": panel.step_s,
        "start": start,
        "p50": [round(float(v), 4) for v in f.p50],
        "p95": [round(float(v), 4) for v in f.p95],
    }


@router.get("/forecast/models")
def list_models(
    broker: Annotated[Broker, Depends(get_broker)], tenant: Annotated[str, Depends(get_tenant)]
) -> dict[str, Any]:
    """The caller's tenant's trained model versions, newest first, with their hold-out metrics."""
    return {"items": UsageStore(broker.sessions).list_models(tenant=tenant)}
