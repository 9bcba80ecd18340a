"""Objects for the Kubernetes tools users already run, built from the broker's prices (docs/kubernetes.md)."""

from __future__ import annotations

from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Depends, Query, Response

from api.deps import get_broker, get_tenant
from broker.app import Broker
from broker.integrations.service import karmada_policies, node_overlays

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


_YAML: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/yaml": {}}, "description": "one YAML document per object"}
}


@router.get("/karmada/placements/{placement_id}", response_class=Response, responses=_YAML)
def karmada_propagation_policies(
    placement_id: str,
    broker: Annotated[Broker, Depends(get_broker)],
    tenant: Annotated[str, Depends(get_tenant)],
    namespace: Annotated[str, Query(description="namespace of the workloads' Deployments")] = "default",
    member: Annotated[
        list[str] | None,
        Query(description="SITE=CLUSTER: the Karmada member cluster of a site (default: the registered clusters)"),
    ] = None,
) -> Response:
    """Karmada `PropagationPolicy`s (policy.karmada.io/v1alpha1) that divide each workload's
    replicas between member clusters with static weights equal to the broker's placement."""
    policies = karmada_policies(broker, placement_id, tenant=tenant, namespace=namespace, members=member or [])
    return Response(yaml.safe_dump_all(policies, sort_keys=False), media_type="application/yaml")
