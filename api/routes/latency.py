"""Latency: GET /v1/latency (catalog figures, or the caller's own measurements) and the
caller's measurements, POST/GET /v1/latency/measurements (docs/latency.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_broker, get_tenant
from api.uploads import csv_or_json_body, json_document, read_upload
from broker.app import Broker
from broker.catalog.latency_measurements import MeasurementStore, read_measurements_csv
from broker.core.latency import parse_geo
from broker.core.latency_measured import geo_key, lookup
from broker.errors import InvalidRequest

router = APIRouter(prefix="/v1", tags=["latency"])
_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}


def _latency_end(value: str, field: str, sites: Mapping[str, Any]) -> str | tuple[float, float]:
    """A site id or ``geo:lat,lon`` query value, or a problem naming the field."""
    if value.startswith("geo:"):
        try:
            return parse_geo(value)
        except ValueError as exc:
            raise InvalidRequest(str(exc), errors=[{"loc": ["query", field], "msg": str(exc)}]) from exc
    if value not in sites:
        raise InvalidRequest(f"unknown site {value!r}", errors=[{"loc": ["query", field], "msg": "unknown site"}])
    return value


def _key(end: str | tuple[float, float]) -> str:
    return end if isinstance(end, str) else geo_key(*end)


@router.get("/latency", responses={422: _PROBLEM})
def latency(
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
    from_: Annotated[str, Query(alias="from", description="site id or geo:lat,lon")],
    to: Annotated[str, Query(description="site id or geo:lat,lon")],
    quantile: Annotated[
        Literal["p50", "p95"], Query(description="p50: typical RTT (median); p95: conservative")
    ] = "p50",
) -> dict[str, Any]:
    """Round-trip time between two ends: the caller's own measurement of that path where it
    imported one, else the catalog's measurement or estimate (`method` says which)."""
    cat = broker.catalog()
    src = _latency_end(from_, "from", cat.sites)
    dst = _latency_end(to, "to", cat.sites)
    out: dict[str, Any] = {"from": from_, "to": to, "quantile": quantile}
    own = lookup(MeasurementStore(broker.sessions).for_tenant(tenant), _key(src), _key(dst), quantile)
    if own is not None:
        return {**out, "rtt_ms": round(own, 2), "source": "measured", "method": "imported", "via": []}
    try:
        est = cat.latency.estimate(src, dst, quantile)
    except (KeyError, ValueError) as exc:
        raise InvalidRequest(f"no latency estimate possible: {exc}") from exc
    # method: measured | anchored | local | distance (docs/latency.md)
    return {**out, "rtt_ms": round(est.rtt_ms, 2), "source": est.source, "method": est.method, "via": list(est.via)}


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
