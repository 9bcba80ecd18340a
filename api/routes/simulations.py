"""Fleet simulations: `POST /v1/simulations` queues a replay of a fleet under several policies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_broker, get_principal, get_tenant
from api.paging import Offset
from api.routes.admin import get_jobs
from api.routes.finops import scope
from broker.access.keys import Principal
from broker.app import Broker
from broker.jobs.queue import JobQueue
from broker.jobs.simulations import DEFAULT_POLICIES, SimulationService
from broker.simulate.fleet import Days

router = APIRouter(prefix="/v1", tags=["simulations"])
_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}
Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class SimulationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored
    fleet: dict[str, Any] = Field(description="a fleet document (docs/simulate.md); `traces` is not accepted here")
    policies: list[str] = Field(default_factory=lambda: list(DEFAULT_POLICIES), min_length=1, max_length=20)
    days: Days | None = Field(None, description="default: the fleet's `days`; one 5-minute step at least")
    seed: int | None = Field(None, description="default: the fleet's `seed`")


class SimulationOut(BaseModel):
    id: str
    tenant: str = Field(description="the tenant that asked for it (its key's; `default` with authentication off)")
    name: str
    status: Status
    progress: float = Field(description="share of every policy's steps replayed, 0 to 1")
    progress_detail: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    policies: list[str]
    days: float | None
    seed: int | None
    error: dict[str, Any] | None = Field(None, description="once failed: a problem document (RFC 9457)")
    cancel_requested: bool = Field(
        False,
        description="a cancel was asked for and the run has not stopped yet (it stops at its next progress "
        "write, after the step it is in, which can be a long opening solve); false once it has ended",
    )
    warnings: list[str] | None = Field(
        None,
        description="once succeeded: what makes the figures doubtful (a broker solve that ran into its "
        "time_limit_s: figures that depend on the machine's speed); null for runs stored before warnings were kept",
    )
    source: Literal["api", "cli"] = Field(
        "api",
        description="extension: who ran it: `api`, a job of POST /v1/simulations; `cli`, a `broker simulate "
        "--store` run on the broker's machine, stored here when it finished (docs/simulate.md)",
    )
    job_id: str | None = Field(None, description="the job that runs it (answer to POST only)")
    summary: list[dict[str, Any]] | None = Field(
        None, description="one row per policy once succeeded: spend, utilisation, starved, unavailable, ..."
    )
    series: dict[str, Any] | None = Field(None, description="per policy: hour and per-step figures for plots")
    events: list[dict[str, Any]] | None = None


class SimulationPage(BaseModel):
    items: list[SimulationOut]
    total: int
    limit: int
    offset: int
    tenants: list[str] = Field(description="the tenants with simulations the caller may see (its own with a key)")


# Which tenant's runs a caller reads: as /v1/dashboard, with authentication off (no key: the local
# single user) any tenant's, all of them unless `?tenant=` says one; with a key its own tenant's only.
TenantQuery = Annotated[str | None, Query(description="only this tenant's simulations")]


@router.post(
    "/simulations",
    status_code=202,
    response_model=SimulationOut,
    responses={422: _PROBLEM},
    summary="Queue a fleet simulation; poll GET /v1/simulations/{id}",
)
def create_simulation(
    body: SimulationIn,
    tenant: Annotated[str, Depends(get_tenant)],
    broker: Annotated[Broker, Depends(get_broker)],
    jobs: Annotated[JobQueue, Depends(get_jobs)],
) -> JSONResponse:
    service = SimulationService(broker)
    sim, job_id = service.create(body.fleet, tenant=tenant, policies=body.policies, days=body.days, seed=body.seed)
    service.submit(jobs, sim["id"], job_id)  # a queue that cannot take it: nothing stored, a 503
    doc = SimulationOut(**sim, job_id=job_id).model_dump(mode="json")
    return JSONResponse(doc, status_code=202, headers={"Location": f"/v1/simulations/{sim['id']}"})


@router.get("/simulations", response_model=SimulationPage, responses={404: _PROBLEM})
def list_simulations(
    caller: Annotated[Principal, Depends(get_principal)],
    broker: Annotated[Broker, Depends(get_broker)],
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Offset = 0,
    tenant: TenantQuery = None,
) -> SimulationPage:
    service = SimulationService(broker)
    items, total = service.list(tenant=scope(caller, tenant), limit=limit, offset=offset)
    return SimulationPage(
        items=[SimulationOut(**i) for i in items],
        total=total,
        limit=limit,
        offset=offset,
        tenants=service.tenants(tenant=scope(caller, None)),
    )


@router.get("/simulations/{sim_id}", response_model=SimulationOut, responses={404: _PROBLEM})
def get_simulation(
    sim_id: str, caller: Annotated[Principal, Depends(get_principal)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    return SimulationService(broker).get(sim_id, tenant=scope(caller, None))


@router.post("/simulations/{sim_id}/cancel", response_model=SimulationOut, responses={404: _PROBLEM, 409: _PROBLEM})
def cancel_simulation(
    sim_id: str, caller: Annotated[Principal, Depends(get_principal)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    return SimulationService(broker).cancel(sim_id, tenant=scope(caller, None))
