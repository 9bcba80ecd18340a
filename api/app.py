"""FastAPI application factory."""

from __future__ import annotations

import importlib
from typing import Any

from fastapi import FastAPI

from api import errors, middleware
from api.routes import ROUTER_MODULES
from broker.app import Broker
from broker.settings import Settings


def create_app(settings: Settings | None = None, *, broker: Broker | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(
        title="placement-broker",
        version="0.1.0",
        description=(
            "Hybrid-cloud, cost-optimizing placement broker. Places replicas onto node pools across "
            "public, private and edge sites at the lowest cost that keeps every hard rule, with a "
            "lower bound that proves how close to optimal the answer is."
        ),
    )
    app.state.broker = broker or Broker.open(settings)
    errors.install(app)
    middleware.install(app)  # auth, idempotency, jobs, metrics, limits (docs/operations.md)
    for name in ROUTER_MODULES:
        app.include_router(importlib.import_module(f"api.routes.{name}").router)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, Any]:
        b: Broker = app.state.broker
        cat = b.catalog()
        return {
            "status": "ok",
            "catalog_version": cat.version,
            "sites": len(cat.sites),
            "pools": cat.table.n_pools,
        }

    return app
