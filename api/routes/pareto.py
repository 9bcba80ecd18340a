"""POST /v1/placements/pareto: the cost-latency and cost-carbon trade-offs of one request."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from api.deps import get_broker, get_tenant
from broker.app import Broker
from broker.core.placement import TradeOff
from broker.placements.documents import PlacementOut
from broker.placements.request_documents import PlacementRequestIn

router = APIRouter(prefix="/v1", tags=["placements"])


class ParetoPointOut(BaseModel):
    weights: dict[str, float]
    cost_per_hour: float
    latency_ms: float  # replica-weighted mean RTT to the request's user regions
    carbon_kg_per_hour: float  # grid intensity x node power estimate
    placement: PlacementOut

    @classmethod
    def from_domain(cls, t: TradeOff) -> ParetoPointOut:
        return cls(
            weights={"cost": t.weights.cost, "latency": t.weights.latency, "carbon": t.weights.carbon},
            cost_per_hour=t.cost_per_hour,
            latency_ms=round(t.latency_ms, 2),
            carbon_kg_per_hour=round(t.carbon_kg_per_hour, 6),
            placement=PlacementOut.from_domain(t.placement),
        )


class ParetoOut(BaseModel):
    cost_latency: list[ParetoPointOut]
    cost_carbon: list[ParetoPointOut]


@router.post(
    "/placements/pareto",
    response_model=ParetoOut,
    responses={422: {"description": "invalid or infeasible request", "content": {"application/problem+json": {}}}},
)
def pareto(
    body: PlacementRequestIn,
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
) -> ParetoOut:
    """Each front lists non-dominated placements, cheapest first; nothing is stored. The request
    is solved as `POST /v1/placements` solves it for the caller's tenant: workloads sized from the
    tenant's usage where they ask for it, owned capacity cut to the tenant's fair share, and the
    tenant's own RTT measurements."""
    fronts = broker.pareto(body, tenant=tenant)
    return ParetoOut(
        cost_latency=[ParetoPointOut.from_domain(t) for t in fronts["cost_latency"]],
        cost_carbon=[ParetoPointOut.from_domain(t) for t in fronts["cost_carbon"]],
    )
