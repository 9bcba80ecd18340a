"""FastAPI application factory: the API's edge, where its settings and its one Broker are built."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import HTMLResponse
from fastapi_offline import FastAPIOffline
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from api import errors, middleware
from api.routes import (
    admin,
    catalog,
    dashboard,
    dispatch,
    extender,
    finops,
    integrations,
    latency,
    pareto,
    placements,
    pricing,
    simulations,
    sites,
    usage,
)
from broker.app import Broker
from broker.db.session import unreachable
from broker.errors import DatabaseUnavailable, QueueUnavailable
from broker.jobs.queue import JobQueue
from broker.settings import Settings

# Every feature area's router, in the order the app tries them: a request goes to the first route
# whose path matches, so where two areas' paths overlap the order decides (tests/unit/api/
# test_routers.py fails when a route is shadowed). A new area adds its router here.
ROUTERS: tuple[APIRouter, ...] = (
    pricing.router,  # before catalog: its /v1/pools/{id}/history must win over /v1/pools/{id:path}
    sites.router,
    catalog.router,
    latency.router,
    placements.router,
    pareto.router,
    finops.router,
    dashboard.router,
    admin.router,
    dispatch.router,
    usage.router,
    extender.router,
    integrations.router,
    simulations.router,
)


def dependency_checks(broker: Broker, jobs: JobQueue) -> dict[str, str]:
    """Each service a request needs, "ok" or "unavailable": the database, and the job queue
    (Redis when configured; in process, always there)."""
    checks = {"database": "ok", "queue": "ok"}
    try:
        with broker.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        if not unreachable(exc):
            raise
        checks["database"] = "unavailable"
    try:
        jobs.ping()
    except QueueUnavailable:
        checks["queue"] = "unavailable"
    return checks


def create_app(settings: Settings | None = None, *, broker: Broker | None = None) -> FastAPI:
    """The app over `broker`, or over a Broker opened here from `settings` (default: the
    environment). A Broker opened here is the app's: its connections close on shutdown."""
    owned = broker is None
    the_broker = Broker.open(settings or Settings()) if broker is None else broker

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:  # after middleware's shutdown (it closes the job queue): no job runs on the Broker any more
            if owned:
                the_broker.close()

    # Swagger UI from assets the package bundles (FastAPI's loads them from a CDN, so it stays
    # blank on a machine without internet), under /docs, which needs no key. ReDoc stays FastAPI's
    # (from the CDN): the ReDoc the package bundles cannot read OpenAPI 3.1's `$defs`
    app = FastAPIOffline(
        static_url="/docs/static",
        redoc_url=None,
        title="placement-broker",
        version="0.1.0",
        description=(
            "Hybrid-cloud, cost-optimizing placement broker. Places replicas onto node pools across "
            "public, private and edge sites at the lowest cost that keeps every hard rule, with a "
            "lower bound that proves how close to optimal the answer is."
        ),
        lifespan=lifespan,
    )
    app.state.broker = the_broker
    errors.install(app)
    middleware.install(app)  # auth, idempotency, jobs, metrics, limits (docs/operations.md)
    for router in ROUTERS:
        app.include_router(router)

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - ReDoc")

    @app.get(
        "/healthz",
        tags=["health"],
        responses={503: {"description": "the database or the job queue cannot be reached (`checks` says which)"}},
    )
    def healthz() -> dict[str, Any]:
        checks = dependency_checks(the_broker, app.state.jobs)
        down = [name for name, state in checks.items() if state != "ok"]
        if down:
            detail = f"unavailable: {', '.join(down)}"
            raise (DatabaseUnavailable if "database" in down else QueueUnavailable)(detail, checks=checks)
        cat = the_broker.catalog()
        return {
            "status": "ok",
            "catalog_version": cat.version,
            "sites": len(cat.sites),
            "pools": cat.table.n_pools,
            "checks": checks,
            "queue": app.state.jobs.kind,
        }

    return app
