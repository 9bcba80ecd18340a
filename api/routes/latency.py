"""Latency: GET /v1/latency (catalog figures, or the caller's own measurements), the same for many
pairs at once, GET /v1/latency/matrix, and the caller's measurements, POST/GET
/v1/latency/measurements (docs/latency.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_broker, get_tenant
from api.uploads import csv_or_json_body, json_document, read_upload
from broker.app import Broker
from broker.catalog.latency_matrix import Pairs, matrix_document, parse_end
from broker.catalog.latency_measurements import MeasurementStore, read_measurements_csv

router = APIRouter(prefix="/v1", tags=["latency"])
_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}


QUANTILE = Annotated[Literal["p50", "p95"], Query(description="p50: typical RTT (median); p95: conservative")]


@router.get("/latency", responses={422: _PROBLEM})
def latency(
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
    from_: Annotated[str, Query(alias="from", description="site id or geo:lat,lon")],
    to: Annotated[str, Query(description="site id or geo:lat,lon")],
    quantile: QUANTILE = "p50",
) -> dict[str, Any]:
    """Round-trip time between two ends: the caller's own measurement of that path where it
    imported one, else the catalog's measurement or estimate (`method` says which)."""
    cat = broker.catalog()
    src = parse_end(from_, ("query", "from"), cat.sites)
    dst = parse_end(to, ("query", "to"), cat.sites)
    return Pairs(cat.latency, MeasurementStore(broker.sessions).for_tenant(tenant), quantile).answer(src, dst)


@router.get("/latency/matrix", responses={404: _PROBLEM, 422: _PROBLEM})
def latency_matrix(
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
    from_: Annotated[
        list[str] | None,
        Query(alias="from", description="site id or geo:lat,lon, repeated; default: every site of the catalog"),
    ] = None,
    to: Annotated[list[str] | None, Query(description="site id or geo:lat,lon, repeated")] = None,
    placement: Annotated[
        str | None, Query(description="a stored placement: its request's user regions are targets too")
    ] = None,
    quantile: QUANTILE = "p50",
) -> dict[str, Any]:
    """Round-trip times from many ends to many (extension, docs/latency.md): every `from` to every
    `to` and every user region of the `placement`'s request, each pair answered as GET /v1/latency
    answers it. At most 10,000 pairs (422 naming `from` and `to` beyond); a pair without a
    figure has `rtt_ms` null and a `detail`."""
    return matrix_document(broker, from_, to, placement, quantile, tenant=tenant)


class MeasurementIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored
    from_: str = Field(alias="from", description="site id")
    to: str = Field(description="site id, geo:lat,lon, or the name of a user region of your requests")
    rtt_ms: float | str
    statistic: str = "p50"
    source: str = "import"


class MeasurementsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored
    measurements: list[MeasurementIn] = Field(min_length=1, max_length=100_000)


_BODY = csv_or_json_body(
    MeasurementsIn, "from,to,rtt_ms,statistic,source\naws:us-east-1,oregon-users,71.5,p50,probes\n", by_alias=True
)


def _rows_from_body(raw: bytes, is_csv: bool) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    if is_csv:
        return read_measurements_csv(raw, loc="body"), ("body",)
    doc = json_document(MeasurementsIn, raw, "the measurements document")
    return [m.model_dump(by_alias=True) for m in doc.measurements], ("body", "measurements")


@router.post(
    "/latency/measurements",
    status_code=201,
    openapi_extra=_BODY,
    responses={422: {"description": "invalid measurements (rows named in errors)", **_PROBLEM}},
)
async def post_measurements(
    request: Request,
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
) -> dict[str, Any]:
    """Store your own RTT measurements: JSON `{"measurements": [{"from", "to", "rtt_ms", "statistic",
    "source"}]}` or CSV `from,to,rtt_ms[,statistic][,source]`. `from` is a site; `to` a site,
    `geo:lat,lon` or a user region name; `statistic` p50 (default) or p95. They win over the
    catalog's figures in your placements and in GET /v1/latency. All or nothing."""
    rows, loc = _rows_from_body(*await read_upload(request))
    sites = broker.catalog().sites
    return MeasurementStore(broker.sessions).import_rows(rows, sites=sites, tenant=tenant, loc=loc)


@router.get("/latency/measurements")
def get_measurements(
    broker: Annotated[Broker, Depends(get_broker)], tenant: Annotated[str, Depends(get_tenant)]
) -> dict[str, Any]:
    """Your stored measurements."""
    items = MeasurementStore(broker.sessions).listing(tenant)
    return {"items": items, "total": len(items)}
