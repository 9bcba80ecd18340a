"""Savings ledger and FOCUS export endpoints."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from api.deps import get_broker, get_principal
from broker.access.keys import Principal
from broker.app import Broker
from broker.errors import NotFound
from broker.finops.documents import SavingsOut
from broker.finops.focus_io import to_csv, to_parquet
from broker.finops.service import FinOps, WindowTime

router = APIRouter(prefix="/v1", tags=["finops"])

_PROBLEM: dict[int | str, dict[str, Any]] = {422: {"content": {"application/problem+json": {}}}}
PARQUET = "application/vnd.apache.parquet"

From = Annotated[WindowTime | None, Query(alias="from", description="window start (ISO 8601; default to - 30 days)")]
To = Annotated[
    WindowTime | None,
    Query(alias="to", description="window end, exclusive (ISO 8601; default now; a later time is now)"),
]


def scope(caller: Principal, requested: str | None) -> str | None:
    """Which tenant's placements a caller sees.

    With authentication off (no key: the local single user) the caller may look at any
    tenant (None = all of them); a caller with a key sees only its own tenant's placements,
    also when that tenant is called "default".
    """
    if caller.key_id is None:
        return requested
    if requested not in (None, caller.tenant):
        raise NotFound(f"tenant {requested!r} does not exist")
    return caller.tenant


@router.get("/savings", response_model=SavingsOut, responses=_PROBLEM)
def savings(
    broker: Annotated[Broker, Depends(get_broker)],
    caller: Annotated[Principal, Depends(get_principal)],
    group_by: Annotated[
        Literal["provider", "site", "tenant", "team", "pool", "name", "workload", "capacity_type"],
        Query(description="how to group the ledger"),
    ] = "provider",
    start: From = None,
    end: To = None,
    tenant: Annotated[str | None, Query(description="only this tenant's placements")] = None,
) -> SavingsOut:
    """Savings against the greedy baseline: run-rate of the current placements and cost accrued in the window."""
    report = FinOps(broker).savings(tenant=scope(caller, tenant), group_by=group_by, start=start, end=end)
    return SavingsOut.from_domain(report)


@router.get(
    "/export/focus",
    responses={
        200: {"content": {"text/csv": {}, PARQUET: {}}, "description": "FOCUS 1.2 cost and usage rows"},
        **_PROBLEM,
    },
    response_class=Response,
)
def export_focus(
    request: Request,
    broker: Annotated[Broker, Depends(get_broker)],
    caller: Annotated[Principal, Depends(get_principal)],
    start: From = None,
    end: To = None,
    tenant: Annotated[str | None, Query(description="only this tenant's placements")] = None,
    format: Annotated[
        Literal["csv", "parquet"] | None, Query(description="csv or parquet (default: from Accept, else csv)")
    ] = None,
) -> Response:
    """FinOps FOCUS export: one row per placement node pool (and storage, egress) per UTC day."""
    fmt = format or ("parquet" if PARQUET in request.headers.get("accept", "") else "csv")
    rows = FinOps(broker).focus(tenant=scope(caller, tenant), start=start, end=end)
    if fmt == "parquet":
        body, media, ext = to_parquet(rows), PARQUET, "parquet"
    else:
        body, media, ext = to_csv(rows), "text/csv; charset=utf-8", "csv"
    return Response(
        body,
        media_type=media,
        headers={
            "Content-Disposition": f'attachment; filename="focus.{ext}"',
            "X-Focus-Version": "1.2",
            "X-Row-Count": str(len(rows)),
        },
    )
