"""Placement endpoints."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from api.deps import get_broker, get_principal, get_tenant
from api.paging import Offset
from api.routes.admin import JobOut, accept_placement_job, get_jobs, wants_async
from api.schemas import PlacementPage, PlacementSummary
from broker.access.keys import Principal
from broker.app import Broker
from broker.jobs.queue import JobQueue
from broker.placements.documents import PlacementOut
from broker.placements.request_documents import PlacementRequestIn

router = APIRouter(prefix="/v1", tags=["placements"])

_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}


@router.post(
    "/placements",
    response_model=PlacementOut,
    status_code=201,
    description="Solve a placement request; store it unless `dry_run`. The solver gets the request's "
    "`time_limit_s`, or by default a budget that grows with its number of workloads (10 s up to 100, "
    "30 s at 3,000, 120 s at 20,000), capped at BROKER_SYNC_TIME_LIMIT_S for a synchronous answer (the "
    "answer's `warnings` say when the cap cut it) and BROKER_ASYNC_TIME_LIMIT_S for an async job. The "
    "answer says the limit it got (`time_limit_s`), how long it ran (`solve_ms`) and why it stopped "
    "(`stop_reason`).",
    responses={
        200: {"model": PlacementOut, "description": "dry run, nothing stored"},
        202: {"model": JobOut, "description": 'queued as an async job ("async": true or a large request)'},
        422: {
            "description": "invalid or infeasible request (problem+json with errors or conflicts)",
            **_PROBLEM,
        },
    },
)
def create_placement(
    body: PlacementRequestIn,
    response: Response,
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
    jobs: Annotated[JobQueue, Depends(get_jobs)],
) -> Any:
    if wants_async(body, broker):
        return accept_placement_job(body, broker=broker, jobs=jobs, tenant=tenant)
    placement, stored = broker.place(body, tenant=tenant)
    if stored:
        response.headers["Location"] = f"/v1/placements/{placement.id}"
    else:
        response.status_code = 200
    return PlacementOut.from_domain(placement)


@router.get("/placements", response_model=PlacementPage)
def list_placements(
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
    name: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Offset = 0,
) -> PlacementPage:
    items, total = broker.list_placements(tenant=tenant, limit=limit, offset=offset, name=name)
    return PlacementPage(
        items=[PlacementSummary.from_domain(i) for i in items], total=total, limit=limit, offset=offset
    )


@router.get("/placements/{placement_id}", response_model=PlacementOut, responses={404: _PROBLEM})
def get_placement(
    placement_id: str,
    broker: Annotated[Broker, Depends(get_broker)],
    caller: Annotated[Principal, Depends(get_principal)],
) -> PlacementOut:
    """A stored placement of the caller's tenant (another tenant's id is 404). Without a key
    (authentication off, loopback) the local operator reads any tenant's, as its dashboard,
    savings and FOCUS export show every tenant's placements."""
    tenant = None if caller.key_id is None else caller.tenant
    return PlacementOut.from_domain(broker.get_placement(placement_id, tenant=tenant))
