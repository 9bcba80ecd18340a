"""Objects for the Kubernetes tools users already run, built from the broker's prices (docs/kubernetes.md)."""

from __future__ import annotations

from typing import Annotated

import yaml
from fastapi import APIRouter, Depends, Query, Response

from api.deps import get_broker
from broker.app import Broker
from broker.integrations.service import node_overlays

router = APIRouter(prefix="/v1/integrations", tags=["kubernetes"])


@router.get(
    "/karpenter/nodeoverlays",
    response_class=Response,
    responses={
        200: {"content": {"application/yaml": {}}, "description": "NodeOverlay objects, one YAML document each"}
    },
)
def karpenter_node_overlays(
    broker: Annotated[Broker, Depends(get_broker)],
    provider: Annotated[str, Query(description="aws or azure")] = "aws",
    commitments: Annotated[
        bool, Query(description="also price committed capacity (every node of the type gets that price)")
    ] = False,
) -> Response:
    """Karpenter `NodeOverlay`s (karpenter.sh/v1alpha1): one per negotiated discount rule
    (`priceAdjustment`, weight growing with the discount), and with `commitments=true` one fixed
    `price` per committed instance type and region. Apply with `kubectl apply -f -`."""
    overlays, notes = node_overlays(broker, provider=provider, commitments=commitments)
    body = yaml.safe_dump_all(overlays, sort_keys=False) if overlays else ""
    headers = {"X-Broker-Notes": "; ".join(notes)[:2000]} if notes else {}
    return Response(body, media_type="application/yaml", headers=headers)
