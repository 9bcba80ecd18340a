"""Target clusters, dispatch of stored placements, replans and the Alertmanager webhook."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request, Response
from fastapi.responses import JSONResponse

from api.deps import get_broker, get_principal, get_tenant
from api.errors import problem
from broker.access.keys import Principal
from broker.app import Broker
from broker.dispatch.alerts import AlertmanagerWebhook
from broker.dispatch.clusters import add_cluster, get_cluster, list_clusters, remove_cluster
from broker.dispatch.documents import ClusterIn, DispatchIn, ReplanIn
from broker.dispatch.outbox import FAILED, DispatchService
from broker.dispatch.policy import TargetPolicy
from broker.dispatch.replan import ReplanService

router = APIRouter(prefix="/v1", tags=["dispatch"])

_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}
BrokerDep = Annotated[Broker, Depends(get_broker)]
TenantDep = Annotated[str, Depends(get_tenant)]


def dispatch_service(request: Request, broker: BrokerDep) -> DispatchService:
    """One service per app, so tests can swap in other dispatchers via app.state."""
    svc = getattr(request.app.state, "dispatch_service", None)
    if svc is None or svc.broker is not broker:
        svc = DispatchService(broker)
        request.app.state.dispatch_service = svc
    return svc


def target_policy(request: Request, broker: BrokerDep) -> TargetPolicy:
    """Built once per app from the broker's settings (roots, data dir, secret key)."""
    cached = getattr(request.app.state, "target_policy", None)
    if cached is None or cached[0] is not broker:
        cached = (broker, TargetPolicy.from_settings(broker.settings))
        request.app.state.target_policy = cached
    policy: TargetPolicy = cached[1]
    return policy


PolicyDep = Annotated[TargetPolicy, Depends(target_policy)]


# ---- clusters ----------------------------------------------------------------------------


@router.post(
    "/clusters",
    status_code=201,
    responses={
        403: {"description": "kubeconfig or gitops_dir (paths on the server) sent with an API key", **_PROBLEM},
        409: _PROBLEM,
        422: _PROBLEM,
        503: {"description": "kubeconfig_content or a repository token, and no BROKER_SECRET_KEY", **_PROBLEM},
    },
)
def create_cluster(
    body: ClusterIn,
    broker: BrokerDep,
    principal: Annotated[Principal, Depends(get_principal)],
    policy: PolicyDep,
    response: Response,
) -> dict[str, Any]:
    """Register a target cluster of a site: a kubeconfig (its content, stored encrypted) or a GitOps
    repository URL. Paths on the broker's machine are for its operator: the CLI, or a caller without
    a key on a loopback-only server (BROKER_AUTH=off)."""
    cluster = add_cluster(
        broker.sessions,
        body,
        known_sites=broker.catalog().sites,
        policy=policy,
        tenant=principal.tenant,
        operator=principal.key_id is None,
    )
    response.headers["Location"] = f"/v1/clusters/{cluster.name}"
    return cluster.to_json()


@router.get("/clusters")
def get_clusters(broker: BrokerDep, tenant: TenantDep) -> list[dict[str, Any]]:
    return [c.to_json() for c in list_clusters(broker.sessions, tenant=tenant)]


@router.get("/clusters/{name}", responses={404: _PROBLEM})
def get_one_cluster(name: str, broker: BrokerDep, tenant: TenantDep) -> dict[str, Any]:
    return get_cluster(broker.sessions, name, tenant=tenant).to_json()


@router.delete("/clusters/{name}", status_code=204, responses={404: _PROBLEM})
def delete_cluster(name: str, broker: BrokerDep, tenant: TenantDep, policy: PolicyDep) -> Response:
    remove_cluster(broker.sessions, name, tenant=tenant, policy=policy)
    return Response(status_code=204)


# ---- dispatch ----------------------------------------------------------------------------


@router.post(
    "/placements/{placement_id}/dispatch",
    responses={
        200: {"description": "applied (or the dry-run plan, or an earlier identical dispatch)"},
        404: _PROBLEM,
        422: {"description": "no cluster for a site, or a template that does not validate", **_PROBLEM},
        502: {"description": "a cluster refused or could not be reached; the dispatch record says which"},
    },
)
def dispatch_placement(
    placement_id: str,
    request: Request,
    svc: Annotated[DispatchService, Depends(dispatch_service)],
    tenant: TenantDep,
    body: Annotated[DispatchIn | None, Body()] = None,
) -> Any:
    """Apply a stored placement to its sites' clusters (durable, resumable, idempotent)."""
    doc = svc.dispatch(placement_id, body or DispatchIn(), tenant=tenant)
    if doc.get("state") == FAILED:
        failed = next((c for c in doc["clusters"] if c["state"] == FAILED), None)
        detail = doc.get("error") or "dispatch failed"
        resp: JSONResponse = problem(
            502,
            "Dispatch failed",
            detail,
            "dispatch-failed",
            request,
            dispatch=doc,
            cluster=(failed or {}).get("cluster"),
        )
        return resp
    return doc


@router.get("/placements/{placement_id}/dispatch", responses={404: _PROBLEM})
def dispatch_status(
    placement_id: str, svc: Annotated[DispatchService, Depends(dispatch_service)], tenant: TenantDep
) -> dict[str, Any]:
    """The latest dispatch of the placement: its state and each cluster's outbox row."""
    return svc.latest(placement_id, tenant=tenant)


@router.get("/dispatches/{dispatch_id}", responses={404: _PROBLEM})
def get_dispatch(
    dispatch_id: str, svc: Annotated[DispatchService, Depends(dispatch_service)], tenant: TenantDep
) -> dict[str, Any]:
    return svc.get(dispatch_id, tenant=tenant)


# ---- replans and alerts --------------------------------------------------------------------


@router.post("/placements/{placement_id}/replan", responses={404: _PROBLEM, 422: _PROBLEM})
def replan_placement(
    placement_id: str, broker: BrokerDep, tenant: TenantDep, body: Annotated[ReplanIn | None, Body()] = None
) -> dict[str, Any]:
    """Re-solve a stored placement against today's prices and capacity (optionally without failed
    sites or with new replica counts); answers the decision, the costs and the migration plan.

    Extension: the plan's steps carry `start_s`/`end_s` (seconds from the start), the plan its
    `makespan_s` and a `schedule` (engine, status, lower bound, each wave's start and end, each
    workload's `max_unavailable`): waves scheduled under node start-up times, dependency order,
    make before break and the disruption budgets (docs/dispatch.md)."""
    return ReplanService(broker).replan(placement_id, body or ReplanIn(), tenant=tenant)


@router.get("/replans/{replan_id}", responses={404: _PROBLEM})
def get_replan(replan_id: str, broker: BrokerDep, tenant: TenantDep) -> dict[str, Any]:
    return ReplanService(broker).get(replan_id, tenant=tenant)


@router.post("/alerts")
def alertmanager_webhook(
    body: AlertmanagerWebhook, broker: BrokerDep, tenant: TenantDep, dry_run: bool = False
) -> dict[str, Any]:
    """Prometheus Alertmanager webhook receiver: site-down and node-overload alerts become replans."""
    return ReplanService(broker).on_alerts(body, tenant=tenant, dry_run=dry_run)
