"""Pricing endpoints: refresh jobs, price freshness, discount rules and pool price history."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_broker, get_tenant
from api.routes.admin import get_jobs
from broker.app import Broker
from broker.catalog.prices import (
    add_discount,
    commit_capacity,
    list_discounts,
    pool_history,
    price_dates,
    stale_sources,
)
from broker.core.domain import CapacityType
from broker.jobs.price_refresh import PriceRefreshJobs
from broker.jobs.queue import JobQueue

router = APIRouter(prefix="/v1", tags=["pricing"])
_PROBLEM: dict[int | str, dict[str, Any]] = {
    404: {"content": {"application/problem+json": {}}},
    422: {"content": {"application/problem+json": {}}},
}


def get_refresh_jobs(broker: Annotated[Broker, Depends(get_broker)]) -> PriceRefreshJobs:
    """Refresh jobs are jobs of kind "price-refresh", run as every job is (broker/jobs)."""
    return PriceRefreshJobs(broker.sessions)


RefreshJobsDep = Annotated[PriceRefreshJobs, Depends(get_refresh_jobs)]


class RefreshIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    provider: Literal["aws", "azure", "gcp", "all"] = "all"
    regions: list[str] = Field(default_factory=list, max_length=500)
    endpoint: str | None = Field(
        None, max_length=500, pattern=r"^https?://", description="base URL override (proxy, sovereign cloud)"
    )


class DiscountIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    provider: Literal["aws", "azure", "gcp"]
    discount_pct: float = Field(gt=0, lt=100)
    family: str = Field("*", min_length=1, max_length=80, description="glob on the instance type, e.g. m6i.*")
    region: str = Field("*", min_length=1, max_length=120, description="glob on the region, e.g. eu-*")
    capacity_types: list[CapacityType] = Field(default_factory=list)
    note: str = Field("", max_length=500)


@router.post("/pricing/refresh", status_code=202, responses=_PROBLEM)
def start_refresh(
    body: RefreshIn,
    response: Response,
    jobs: RefreshJobsDep,
    queue: Annotated[JobQueue, Depends(get_jobs)],
    tenant: Annotated[str, Depends(get_tenant)],
) -> dict[str, Any]:
    """Fetch current prices in the background; poll the job at the Location header."""
    job = jobs.start(queue, tenant=tenant, provider=body.provider, regions=body.regions or None, endpoint=body.endpoint)
    response.headers["Location"] = f"/v1/pricing/jobs/{job['id']}"
    return job


@router.get("/pricing/jobs/{job_id}", responses=_PROBLEM)
def get_refresh_job(job_id: str, jobs: RefreshJobsDep) -> dict[str, Any]:
    return jobs.get(job_id)


@router.get("/pricing/status")
def pricing_status(broker: Annotated[Broker, Depends(get_broker)]) -> dict[str, Any]:
    """Newest and oldest price date per source; sources whose newest price is older than
    BROKER_PRICE_STALE_AFTER_DAYS are listed in `stale`."""
    dates = price_dates(broker.sessions)
    days = broker.settings.price_stale_after_days
    return {
        "price_as_of": dates,
        "stale_after_days": days,
        "stale": stale_sources({p: d["newest"] for p, d in dates.items()}, max_age_days=days),
    }


@router.get("/pricing/discounts")
def get_discounts(broker: Annotated[Broker, Depends(get_broker)]) -> list[dict[str, Any]]:
    return list_discounts(broker.sessions)


@router.post("/pricing/discounts", status_code=201, responses=_PROBLEM)
def post_discount(body: DiscountIn, broker: Annotated[Broker, Depends(get_broker)]) -> dict[str, Any]:
    """Add a negotiated discount rule; the provider's pools are re-priced from their list prices."""
    return add_discount(
        broker.sessions,
        provider=body.provider,
        discount_pct=body.discount_pct,
        family=body.family,
        region=body.region,
        capacity_types=[c.value for c in body.capacity_types],
        note=body.note,
    )


class CommitmentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    site: str = Field(min_length=3, max_length=200, examples=["aws:eu-central-1"])
    instance_type: str = Field(min_length=1, max_length=120, examples=["m6i.xlarge"])
    count: int = Field(ge=0, le=1_000_000, description="nodes already bought")
    usd_per_hour: float = Field(0.0, ge=0, description="marginal price still paid per node-hour (0 = sunk)")
    note: str = Field("", max_length=40)


@router.post("/pricing/commitments", status_code=201, responses=_PROBLEM)
def post_commitment(body: CommitmentIn, broker: Annotated[Broker, Depends(get_broker)]) -> dict[str, Any]:
    """Already-bought capacity: the site's reserved pool of that type becomes `count` nodes at a sunk price."""
    return commit_capacity(broker.sessions, **body.model_dump())


# registered before catalog's GET /v1/pools/{pool_id:path} (see api/routes/__init__.py)
@router.get("/pools/{pool_id:path}/history", responses=_PROBLEM)
def get_pool_history(
    pool_id: str,
    broker: Annotated[Broker, Depends(get_broker)],
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> dict[str, Any]:
    """Every price the pool had, newest first, with its source and effective time."""
    return pool_history(broker.sessions, pool_id, limit=limit)
