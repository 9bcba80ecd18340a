"""What the PlacementRequest controller decides, as pure functions of the custom resources.

The controller (controller.py) reads objects, calls the broker and writes what these functions
return; keeping the decisions here makes them testable without an API server.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from broker.core.placement import Placement

GROUP = "placement-broker.dev"
VERSION = "v1alpha1"
REQUESTS = "placementrequests"
POLICIES = "placementpolicies"
FINALIZER = f"{GROUP}/placement"
READY = "Ready"
# request fields the CRD carries besides the contract's request document
CONTROL_FIELDS = ("dispatch",)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event(
    obj: Mapping[str, Any], *, api_version: str, kind: str, event_type: str, reason: str, message: str, component: str
) -> dict[str, Any]:
    """A core/v1 Event about `obj` (an Event is a courtesy: status already carries the answer)."""
    meta = obj["metadata"]
    stamp = now()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": api_version,
            "kind": kind,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": event_type,
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def needs_solve(obj: Mapping[str, Any]) -> bool:
    """A spec the controller has not answered yet (new, or changed since the last answer)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    return bool(status.get("observedGeneration") != meta.get("generation") or not status.get("phase"))


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def has_finalizer(obj: Mapping[str, Any]) -> bool:
    return FINALIZER in ((obj.get("metadata") or {}).get("finalizers") or [])


def request_document(obj: Mapping[str, Any], policies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The contract's request from the resource's spec, the namespace's PlacementPolicy filling what
    the spec leaves out (a field the request sets always wins)."""
    spec = copy.deepcopy(dict(obj.get("spec") or {}))
    for key in CONTROL_FIELDS:
        spec.pop(key, None)
    meta = obj.get("metadata") or {}
    spec.setdefault("name", f"{meta.get('namespace', 'default')}.{meta['name']}")
    spec["dry_run"] = False  # a resource's answer is stored: dispatch and FinOps need it
    for policy in sorted(policies, key=lambda p: str((p.get("metadata") or {}).get("name", ""))):
        defaults = policy.get("spec") or {}
        if "timeLimitS" in defaults:
            spec.setdefault("time_limit_s", defaults["timeLimitS"])
        for workload in spec.get("workloads") or []:
            if not isinstance(workload, dict):
                continue
            if "residency" in defaults:
                workload.setdefault("residency", defaults["residency"])
            if "capacityTypes" in defaults:
                workload.setdefault("capacity_types", list(defaults["capacityTypes"]))
            if "providers" in defaults:
                workload.setdefault("providers", list(defaults["providers"]))
    return spec


def cost_limit(policies: Sequence[Mapping[str, Any]]) -> float | None:
    """The tightest maxCostPerHour of the namespace's policies."""
    limits = [
        float(p["spec"]["maxCostPerHour"]) for p in policies if (p.get("spec") or {}).get("maxCostPerHour") is not None
    ]
    return min(limits) if limits else None


def condition(status: str, reason: str, message: str, generation: int | None) -> dict[str, Any]:
    return {
        "type": READY,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": now(),
        "reason": reason,
        "message": message[:32_768],
    }


def placed_status(answer: Placement, generation: int | None) -> dict[str, Any]:
    """The status of an answered request: its cost, bound and gap, and a summary of where it runs."""
    return _placement_status(answer, generation, phase="Placed", ready=True)


def dispatched_status(answer: Placement, generation: int | None, dispatch_id: str) -> dict[str, Any]:
    """A placement applied to every cluster of its sites (the Dispatched printer column reads `dispatched`)."""
    status = _placement_status(answer, generation, phase="Dispatched", ready=True)
    return {**status, "dispatched": True, "dispatchId": dispatch_id}


def dispatch_failed_status(
    answer: Placement, generation: int | None, failure: str, dispatch_id: str | None
) -> dict[str, Any]:
    """Placed and stored, but not dispatched: phase Failed, reason DispatchFailed. The placement's
    fields stay, so it can be dispatched later by its id (POST /v1/placements/{id}/dispatch)."""
    message = f"placed as {answer.id} ({answer.result.cost_per_hour} USD/h) but not dispatched: {failure}"
    status = _placement_status(
        answer, generation, phase="Failed", ready=False, reason="DispatchFailed", message=message
    )
    return {**status, **({"dispatchId": dispatch_id} if dispatch_id else {})}


def _placement_status(
    answer: Placement,
    generation: int | None,
    *,
    phase: str,
    ready: bool,
    reason: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    r = answer.result
    sites: dict[str, set[str]] = {}
    replicas: dict[str, int] = {}
    for a in r.assignments:
        sites.setdefault(a.workload, set()).add(a.site)
        replicas[a.workload] = replicas.get(a.workload, 0) + a.replicas
    pools = [{"pool": n.pool, "count": n.count, "costPerHour": n.cost_per_hour} for n in r.nodes]
    message = message or f"{r.status}: {r.cost_per_hour} USD/h, gap {r.gap_pct} %"
    return {
        "phase": phase,
        "observedGeneration": generation,
        "placementId": answer.id or "",
        "costPerHour": r.cost_per_hour,
        "lowerBoundPerHour": r.lower_bound_per_hour,
        "gapPct": r.gap_pct,
        "solverStatus": r.status,
        "nodes": sum(p["count"] for p in pools),
        "pools": pools,
        "workloads": [{"name": w, "sites": sorted(s), "replicas": replicas[w]} for w, s in sorted(sites.items())],
        "dispatched": False,
        "message": message,
        "conditions": [condition("True" if ready else "False", reason or phase, message, generation)],
    }


def failed_status(phase: str, reason: str, message: str, generation: int | None) -> dict[str, Any]:
    """Invalid, Infeasible or Failed: the message names the field or the conflicting constraints."""
    return {
        "phase": phase,
        "observedGeneration": generation,
        "dispatched": False,
        "message": message,
        "conditions": [condition("False", reason, message, generation)],
    }


def invalid_message(detail: str, errors: Sequence[Mapping[str, Any]], *, root: str = "spec") -> str:
    """`spec.workloads[0].replicas: Input should be a valid integer` from the broker's error list;
    `root=""` for errors about the stored placement (`assignments[0].site: ...`), not the spec."""
    parts = []
    for e in errors:
        loc = [str(p) for p in e.get("loc", []) if p != "body"]
        path = root
        for p in loc:
            path += f"[{p}]" if p.isdigit() else (f".{p}" if path else p)
        parts.append(f"{path}: {e.get('msg', '')}")
    return "; ".join(parts) or detail
