"""Service administration: API keys, budgets, family quotas, async jobs, and who am I."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_broker, get_principal, get_tenant
from api.paging import Offset
from broker.access.keys import KeyStore, Principal, Role
from broker.app import Broker
from broker.errors import Forbidden
from broker.jobs.queue import JobQueue, submit
from broker.jobs.store import JobStore
from broker.placements.budgets import TENANT_WIDE, Budgets
from broker.placements.family_quotas import FamilyQuotas, quota_groups
from broker.placements.request_documents import Name, PlacementRequestIn

router = APIRouter(prefix="/v1", tags=["service"])
_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}


def require_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    # AuthMiddleware already enforces the role rules; this keeps the rule next to the route too
    if not principal.may(Role.admin):
        raise Forbidden(f"this needs the admin role; the key has {principal.role.name}")
    return principal


def get_keys(request: Request) -> KeyStore:
    keys: KeyStore = request.app.state.keys
    return keys


def get_jobs(request: Request) -> JobQueue:
    jobs: JobQueue = request.app.state.jobs
    return jobs


# ---- who am I -------------------------------------------------------------------------


class WhoAmI(BaseModel):
    tenant: str
    role: Literal["viewer", "planner", "admin"]
    key_id: str | None


@router.get("/whoami", response_model=WhoAmI)
def whoami(principal: Annotated[Principal, Depends(get_principal)]) -> WhoAmI:
    return WhoAmI(tenant=principal.tenant, role=principal.role.name, key_id=principal.key_id)


# ---- API keys -------------------------------------------------------------------------


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored
    role: Literal["viewer", "planner", "admin"]
    name: str = Field("", max_length=200)


class KeyOut(BaseModel):
    id: str
    tenant: str
    role: str
    name: str
    created_at: str
    revoked_at: str | None
    key: str | None = Field(None, description="the key itself: shown in this answer only")


@router.post("/apikeys", response_model=KeyOut, status_code=201, responses={422: _PROBLEM})
def create_key(
    body: KeyIn,
    principal: Annotated[Principal, Depends(require_admin)],
    keys: Annotated[KeyStore, Depends(get_keys)],
) -> KeyOut:
    desc, key = keys.create(tenant=principal.tenant, role=Role[body.role], name=body.name)
    return KeyOut(**desc, key=key)


@router.get("/apikeys", response_model=list[KeyOut])
def list_keys(
    principal: Annotated[Principal, Depends(require_admin)], keys: Annotated[KeyStore, Depends(get_keys)]
) -> list[KeyOut]:
    return [KeyOut(**d) for d in keys.list_keys(tenant=principal.tenant)]


@router.delete("/apikeys/{key_id}", response_model=KeyOut, responses={404: _PROBLEM})
def revoke_key(
    key_id: str,
    principal: Annotated[Principal, Depends(require_admin)],
    keys: Annotated[KeyStore, Depends(get_keys)],
) -> KeyOut:
    return KeyOut(**keys.revoke(key_id, tenant=principal.tenant))


# ---- budgets --------------------------------------------------------------------------


class BudgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored
    monthly_usd: float = Field(ge=0, le=1e12)
    team: Name | None = Field(None, description="a team label of placement requests; omitted: the whole tenant")


class BudgetFigures(BaseModel):
    team: str | None
    monthly_usd: float
    used: float
    this_placement: float
    projected: float
    remaining: float
    over: bool


class BudgetReport(BaseModel):
    tenant: str
    committed_per_month: float
    budgets: list[BudgetFigures]


@router.get("/budgets", response_model=BudgetReport)
def get_budgets(
    tenant: Annotated[str, Depends(get_tenant)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    return Budgets(broker.sessions).report(tenant=tenant)


@router.put("/budgets", response_model=BudgetFigures, responses={422: _PROBLEM})
def set_budget(
    body: BudgetIn, tenant: Annotated[str, Depends(get_tenant)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    return Budgets(broker.sessions).set(tenant=tenant, team=body.team or TENANT_WIDE, monthly_usd=body.monthly_usd)


@router.delete("/budgets", status_code=204, responses={404: _PROBLEM})
def delete_budget(
    tenant: Annotated[str, Depends(get_tenant)],
    broker: Annotated[Broker, Depends(get_broker)],
    team: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    Budgets(broker.sessions).delete(tenant=tenant, team=team or TENANT_WIDE)
    return Response(status_code=204)


# ---- family quotas -------------------------------------------------------------------


class FamilyQuotaIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored
    quota_group: str = Field(
        min_length=3, max_length=120, description="a pool's quota_group: aws:Inf, aws:G and VT, azure:ndasrv4, gcp:a2"
    )
    vcpus: float = Field(ge=0, le=1e9, description="vCPUs the tenant's accounts can run in the group (0: none)")


class FamilyQuotaOut(BaseModel):
    quota_group: str
    vcpus: float


class FamilyQuotaReport(BaseModel):
    tenant: str
    quotas: list[FamilyQuotaOut]


@router.get("/quotas", response_model=FamilyQuotaReport)
def get_quotas(
    tenant: Annotated[str, Depends(get_tenant)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    """The tenant's vCPU quotas per provider quota group (extension; docs/solver.md, Node classes)."""
    quotas = FamilyQuotas(broker.sessions).for_tenant(tenant)
    return {"tenant": tenant, "quotas": [{"quota_group": g, "vcpus": v} for g, v in quotas.items()]}


@router.put("/quotas", response_model=FamilyQuotaOut, responses={422: _PROBLEM})
def set_quota(
    body: FamilyQuotaIn, tenant: Annotated[str, Depends(get_tenant)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    """Set one quota: placements keep off the group's nodes larger than it (0: all of them)."""
    return FamilyQuotas(broker.sessions).set(
        tenant=tenant, quota_group=body.quota_group, vcpus=body.vcpus, known=quota_groups(broker.catalog().table)
    )


@router.delete("/quotas", status_code=204, responses={404: _PROBLEM})
def delete_quota(
    tenant: Annotated[str, Depends(get_tenant)],
    broker: Annotated[Broker, Depends(get_broker)],
    quota_group: Annotated[str, Query(min_length=3, max_length=120)],
) -> Response:
    FamilyQuotas(broker.sessions).delete(tenant=tenant, quota_group=quota_group)
    return Response(status_code=204)


# ---- jobs -----------------------------------------------------------------------------


class JobOut(BaseModel):
    id: str
    kind: str
    status: Literal["queued", "running", "succeeded", "failed"]
    created_at: str
    started_at: str | None
    finished_at: str | None
    attempts: int
    placement_id: str | None
    result: dict[str, Any] | None = Field(None, description="the placement document once succeeded")
    error: dict[str, Any] | None = Field(None, description="the problem document once failed")


class JobPage(BaseModel):
    items: list[JobOut]
    total: int
    limit: int
    offset: int


@router.get("/jobs", response_model=JobPage)
def list_jobs(
    tenant: Annotated[str, Depends(get_tenant)],
    broker: Annotated[Broker, Depends(get_broker)],
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Offset = 0,
) -> JobPage:
    items, total = JobStore(broker.sessions).list_jobs(tenant=tenant, limit=limit, offset=offset)
    return JobPage(items=[JobOut(**i) for i in items], total=total, limit=limit, offset=offset)


@router.get("/jobs/{job_id}", response_model=JobOut, responses={404: _PROBLEM})
def get_job(
    job_id: str, tenant: Annotated[str, Depends(get_tenant)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    return JobStore(broker.sessions).get(job_id, tenant=tenant)


def wants_async(body: PlacementRequestIn, broker: Broker) -> bool:
    return body.async_ or len(body.workloads) > broker.settings.max_workloads_sync


def accept_placement_job(body: PlacementRequestIn, *, broker: Broker, jobs: JobQueue, tenant: str) -> JSONResponse:
    """Queue a placement request; 202 with the job and where to poll it."""
    store = JobStore(broker.sessions)
    job = store.create(tenant=tenant, request=body.model_dump(mode="json", by_alias=True))
    submit(jobs, store, job["id"])  # a queue that cannot take it: nothing stored, a 503
    doc = JobOut(**job).model_dump(mode="json")
    return JSONResponse(doc, status_code=202, headers={"Location": f"/v1/jobs/{job['id']}"})
