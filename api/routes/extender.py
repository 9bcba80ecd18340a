"""kube-scheduler extender endpoints: POST /extender/filter and /extender/prioritize (docs/kubernetes.md).

kube-scheduler cannot send an API key, so these paths are public (api/auth.py PUBLIC_PATHS): they
read only the catalog's list prices and the pod and nodes the scheduler sends, no tenant data.
Trouble is answered in the protocol's own `Error` field with 200, as the scheduler expects,
never as a 5xx that would fail the pod's scheduling cycle without a reason.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends

from api.deps import get_broker
from broker.app import Broker
from broker.integrations import extender

router = APIRouter(prefix="/extender", tags=["kubernetes"])
log = logging.getLogger("broker.extender")

_ARGS = Body(description="ExtenderArgs (k8s.io/kube-scheduler/extender/v1): Pod, and Nodes or NodeNames")


def _pools(broker: Broker) -> extender.PoolLookup:
    table = broker.catalog().table

    def lookup(pool_id: str) -> tuple[float, float, float] | None:
        i = table.pool_index.get(pool_id)
        if i is None:
            return None
        return float(table.price[i]), float(table.vcpus[i]), float(table.memory_gib[i])

    return lookup


@router.post("/filter", summary="kube-scheduler extender filter")
def filter_nodes(args: Annotated[Any, _ARGS], broker: Annotated[Broker, Depends(get_broker)]) -> dict[str, Any]:
    """ExtenderFilterResult: nodes the pod may use; nodes its residency policy forbids in
    `FailedAndUnresolvableNodes`. Node objects answer as `Nodes`, names as `NodeNames`."""
    try:
        pod, nodes, names = extender.read_args(args)
        ask = extender.pod_ask(pod)
        views = [extender.node_pool(n) for n in nodes] if nodes is not None else _unlabelled(names)
        result = extender.filter_nodes(ask, views, broker.catalog().sites)
    except extender.ExtenderInputError as exc:
        return {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": str(exc),
        }
    except Exception as exc:  # the scheduler gets a reason, the operator a log line
        log.exception("extender filter failed")
        return {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": f"internal error: {type(exc).__name__}",
        }
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


@router.post("/prioritize", summary="kube-scheduler extender prioritize")
def prioritize(args: Annotated[Any, _ARGS], broker: Annotated[Broker, Depends(get_broker)]) -> list[dict[str, Any]]:
    """HostPriorityList: 10 for nodes of the pool the broker chose for this pod, 1-9 by what a
    replica costs on the node's pool (cheapest highest), 0 where the pool is unknown. On bad input
    every node scores 0 (a prioritize call has no error field; the scheduler logs nothing)."""
    try:
        pod, nodes, names = extender.read_args(args)
        ask = extender.pod_ask(pod)
        views = [extender.node_pool(n) for n in nodes] if nodes is not None else _unlabelled(names)
        scores = extender.prioritize(ask, views, _pools(broker))
    except extender.ExtenderInputError:
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
