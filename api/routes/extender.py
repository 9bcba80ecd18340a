"""kube-scheduler extender endpoints: POST /extender/filter and /extender/prioritize (docs/kubernetes.md).

kube-scheduler cannot send an API key, so these paths are public (api/auth.py PUBLIC_PATHS): they
read only the catalog's list prices and the pod and nodes the scheduler sends, no tenant data.
Trouble is answered in the protocol's own `Error` field with 200, as the scheduler expects,
never as a 5xx that would fail the pod's scheduling cycle without a reason.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from starlette.requests import Request

from api.deps import get_broker
from broker.app import Broker
from broker.integrations import extender

router = APIRouter(prefix="/extender", tags=["kubernetes"])
log = logging.getLogger("broker.extender")

# The body is read raw, not as a FastAPI body parameter: one that is not JSON would be answered
# 422, which the scheduler reads as a failed call without a reason (docs/kubernetes.md).
_ARGS = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "description": "ExtenderArgs (k8s.io/kube-scheduler/extender/v1): Pod, and Nodes or NodeNames"
                }
            }
        },
    }
}


async def _body(request: Request) -> bytes:
    return await request.body()  # at most BROKER_MAX_BODY_BYTES: ServiceMiddleware answers 413 beyond


def _pools(broker: Broker) -> extender.PoolLookup:
    table = broker.catalog().table

    def lookup(pool_id: str) -> tuple[float, float, float] | None:
        i = table.pool_index.get(pool_id)
        if i is None:
            return None
        return float(table.price[i]), float(table.vcpus[i]), float(table.memory_gib[i])

    return lookup


def _read(body: bytes) -> tuple[extender.PodAsk, list[dict[str, Any]] | None, list[str], list[extender.NodePool]]:
    """(what the pod asks, node objects or None, node names, each node's pool); ExtenderInputError
    names what is malformed."""
    pod, nodes, names = extender.parse_args(body)
    ask = extender.pod_ask(pod)
    views = extender.node_pools(nodes) if nodes is not None else _unlabelled(names)
    return ask, nodes, names, views


@router.post("/filter", summary="kube-scheduler extender filter", openapi_extra=_ARGS)
def filter_nodes(
    body: Annotated[bytes, Depends(_body)], broker: Annotated[Broker, Depends(get_broker)]
) -> dict[str, Any]:
    """ExtenderFilterResult: nodes the pod may use; nodes its residency policy forbids in
    `FailedAndUnresolvableNodes`. Node objects answer as `Nodes`, names as `NodeNames`."""
    try:
        ask, nodes, names, views = _read(body)
        result = extender.filter_nodes(ask, views, broker.catalog().sites)
    except extender.ExtenderInputError as exc:
        return _filter_error(str(exc))
    except Exception as exc:  # the scheduler gets a reason, the operator a log line
        log.exception("extender filter failed")
        return _filter_error(f"internal error: {type(exc).__name__}")
    keep = set(result.passed)
    out: dict[str, Any] = {
        "FailedNodes": result.failed,
        "FailedAndUnresolvableNodes": result.unresolvable,
        "Error": "",
    }
    if nodes is not None:
        out["Nodes"] = {
            "apiVersion": "v1",
            "kind": "NodeList",
            "metadata": {},
            "items": [n for n, v in zip(nodes, views, strict=True) if v.node in keep],
        }
        out["NodeNames"] = None
    else:
        out["Nodes"] = None
        out["NodeNames"] = [n for n in names if n in keep]
    return out


@router.post("/prioritize", summary="kube-scheduler extender prioritize", openapi_extra=_ARGS)
def prioritize(
    body: Annotated[bytes, Depends(_body)], broker: Annotated[Broker, Depends(get_broker)]
) -> list[dict[str, Any]]:
    """HostPriorityList: 10 for nodes of the pool the broker chose for this pod, 1-9 by what a
    replica costs on the node's pool (cheapest highest), 0 where the pool is unknown. On bad input
    the list is empty (a prioritize answer has no error field: the reason goes to the broker's log)."""
    try:
        ask, _, _, views = _read(body)
        scores = extender.prioritize(ask, views, _pools(broker))
    except extender.ExtenderInputError as exc:
        log.warning("extender prioritize: %s", exc)
        return []
    except Exception:
        log.exception("extender prioritize failed")
        return []
    return [{"Host": host, "Score": score} for host, score in scores]


def _filter_error(message: str) -> dict[str, Any]:
    return {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": message}


def _unlabelled(names: list[str]) -> list[extender.NodePool]:
    # with nodeCacheCapable the scheduler sends names only: nothing maps them to pools, so every
    # node passes and scores 0 (docs/kubernetes.md asks for nodeCacheCapable: false)
    return [extender.NodePool(node=n, site=None, pool=None) for n in names]
