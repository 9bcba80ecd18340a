"""POST /v1/placements/pareto: the cost-latency and cost-carbon trade-offs of one request."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from api.deps import get_broker
from broker.app import Broker
from broker.placements.documents import PlacementOut, PlacementRequestIn

router = APIRouter(prefix="/v1", tags=["placements"])


class ParetoPointOut(BaseModel):
    weights: dict[str, float]
    cost_per_hour: float
    latency_ms: float  # replica-weighted mean RTT to the request's user regions
    carbon_kg_per_hour: float  # grid intensity x node power estimate
    placement: PlacementOut


class ParetoOut(BaseModel):
    cost_latency: list[ParetoPointOut]
    cost_carbon: list[ParetoPointOut]


@router.post(
    "/placements/pareto",
    response_model=ParetoOut,
    responses={422: {"description": "invalid or infeasible request", "content": {"application/problem+json": {}}}},
)
def pareto(body: PlacementRequestIn, broker: Annotated[Broker, Depends(get_broker)]) -> dict[str, Any]:
    """Each front lists non-dominated placements, cheapest first; nothing is stored."""
    return broker.pareto(body)
