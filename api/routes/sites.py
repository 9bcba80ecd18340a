"""POST /v1/sites: add or update private and edge sites (GET /v1/sites lives in catalog.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from api.deps import get_broker
from broker.app import Broker
from broker.catalog.private_sites import SitesDocument, import_sites

router = APIRouter(prefix="/v1", tags=["sites"])


@router.post(
    "/sites",
    status_code=201,
    responses={422: {"description": "invalid sites document", "content": {"application/problem+json": {}}}},
)
def upsert_sites(body: SitesDocument, broker: Annotated[Broker, Depends(get_broker)]) -> dict[str, Any]:
    """Add or replace private/edge sites, same document as `broker sites import` (here as JSON).

    Each node type becomes the pool `<site>/<name>/reserved` with `max_nodes = count`, priced by the
    TCO formula or the flat monthly rate. Answers the pools created and the new catalog version."""
    return import_sites(broker.sessions, body)
