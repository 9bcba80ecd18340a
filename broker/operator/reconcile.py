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


# PlacementPolicy field -> the workload field of the request it fills
POLICY_WORKLOAD_FIELDS = {"residency": "residency", "capacityTypes": "capacity_types", "providers": "providers"}

# where a request field came from when a PlacementPolicy filled it: its location in the request
# document (as the broker's errors name it) -> the policy's field (`PlacementPolicy ns/name spec.residency`)
Filled = dict[tuple[str, ...], str]


def request_document(obj: Mapping[str, Any], policies: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], Filled]:
    """The contract's request from the resource's spec, the namespace's PlacementPolicy filling what
    the spec leaves out (a field the request sets always wins), and which fields the policies filled,
    so an error in one names the policy, not the request."""
    spec = copy.deepcopy(dict(obj.get("spec") or {}))
    for key in CONTROL_FIELDS:
        spec.pop(key, None)
    meta = obj.get("metadata") or {}
    spec.setdefault("name", f"{meta.get('namespace', 'default')}.{meta['name']}")
    spec["dry_run"] = False  # a resource's answer is stored: dispatch and FinOps need it
    filled: Filled = {}
    for policy in sorted(policies, key=lambda p: str((p.get("metadata") or {}).get("name", ""))):
        defaults = policy.get("spec") or {}
        pmeta = policy.get("metadata") or {}
        origin = f"PlacementPolicy {pmeta.get('namespace', meta.get('namespace'))}/{pmeta.get('name')} spec."
        if "timeLimitS" in defaults and "time_limit_s" not in spec:
            spec["time_limit_s"] = defaults["timeLimitS"]
            filled[("time_limit_s",)] = origin + "timeLimitS"
        for i, workload in enumerate(spec.get("workloads") or []):
            if not isinstance(workload, dict):
                continue
            for field, key in POLICY_WORKLOAD_FIELDS.items():
                if field in defaults and key not in workload:
                    value = defaults[field]
                    workload[key] = list(value) if isinstance(value, list) else value
                    filled[("workloads", str(i), key)] = origin + field
    return spec, filled


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


def invalid_message(
    detail: str, errors: Sequence[Mapping[str, Any]], *, root: str = "spec", filled: Filled | None = None
) -> str:
    """`spec.workloads[0].replicas: Input should be a valid integer` from the broker's error list;
    a field a policy filled is named as the policy's (`PlacementPolicy shop/defaults spec.residency`),
    once however many workloads it filled; `root=""` for errors about the stored placement
    (`assignments[0].site: ...`), not the spec."""
    parts: dict[str, None] = {}  # in order, each once
    for e in errors:
        parts[f"{error_path(e, root, filled or {})}: {e.get('msg', '')}"] = None
    return "; ".join(parts) or detail


def error_path(error: Mapping[str, Any], root: str, filled: Filled) -> str:
    loc = _loc(error)
    path, rest = root, loc
    if (n := _filled_prefix(loc, filled)) is not None:
        path, rest = filled[loc[:n]], loc[n:]
    for p in rest:
        path += f"[{p}]" if p.isdigit() else (f".{p}" if path else p)
    return path


def blames_policy(errors: Sequence[Mapping[str, Any]], filled: Filled) -> bool:
    """Every error is in a field a PlacementPolicy filled: the policy is invalid, not the request."""
    return bool(errors) and all(_filled_prefix(_loc(e), filled) is not None for e in errors)


def _loc(error: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(p) for p in error.get("loc", []) if p != "body")


def _filled_prefix(loc: tuple[str, ...], filled: Filled) -> int | None:
    """The length of the longest start of `loc` a policy filled (an error may point inside the value)."""
    return next((n for n in range(len(loc), 0, -1) if loc[:n] in filled), None)
