"""Kueue MultiKueue external dispatcher: which worker clusters a Workload is nominated to, in the
broker's cost and residency order.

Kueue (v0.13+) lets an external controller choose the worker clusters of a MultiKueue Workload
(`multiKueue.dispatcherName` in Kueue's configuration names it): the controller writes
`.status.nominatedClusterNames` and MultiKueue copies the Workload to those clusters only; the
first one to admit it wins, Kueue then sets `.status.clusterName` and clears the nomination.
MultiKueue gives the order inside the list no meaning, so the broker's preference is expressed by
*which* clusters are nominated *when*: the cheapest first, widening by rounds (broker/operator/kueue.py).

The status write must be a server-side apply under Kueue's own field manager (`kueue-admission`):
Kueue clears the nomination by applying its admission status without the field, which removes
it only when no other manager also owns it. An apply under one manager owns exactly the fields it
sends, so the apply carries every admission field Kueue's manager writes (their current values)
besides the nomination; sending the nomination alone would drop Kueue's admission, conditions and
checks from the object.

Pure: the caller passes the Workload, the worker clusters with their sites, and the pool table.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml
from kubernetes.utils.quantity import parse_quantity

from broker.core.domain import Arch, CapacityType, ResidencyPolicy, Site
from broker.core.pooltable import ARCHES, CAPACITY_TYPES, PoolTable
from broker.core.residency import resolve_policy
from broker.integrations.extender import PREFIX, RESIDENCY_ANNOTATION
from pricing.node_classes import NODE_CLASSES, OPT_IN_CLASSES

GROUP = "kueue.x-k8s.io"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"  # AdmissionCheck.spec.controllerName
DISPATCHER_NAME = f"{PREFIX}/multikueue-dispatcher"
FIELD_MANAGER = "kueue-admission"  # the manager of Kueue's admission status (pkg/constants AdmissionName)
MAX_NOMINATED = 10  # KEP-693's limit on nominatedClusterNames (v0.13 validates it; later versions allow 20)
SITE_ANNOTATION = f"{PREFIX}/site"
CAPACITY_ANNOTATION = f"{PREFIX}/capacity-types"
REJECTED_ANNOTATION = f"{PREFIX}/rejected-clusters"
PODS_PER_NODE = 110  # the kubelet's default maxPods: bounds how many request-less pods share a node
EVICTED_BY_CHECK = "AdmissionCheck"  # Evicted condition reason when an admission check went Retry
_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
# what Kueue's admission status apply carries (pkg/workload/patching), by JSON name in v1beta1 and v1beta2
ADMISSION_CONDITIONS = frozenset(
    {
        "QuotaReserved",
        "BlockedOnPreemptionGates",
        "Evicted",
        "Admitted",
        "Preempted",
        "Requeued",
        "DeactivationTarget",
        "Finished",
        "PodsReady",
    }
)
ADMISSION_FIELDS = (
    "admission",
    "requeueState",
    "resourceRequests",
    "admissionChecks",
    "accumulatedPastExexcutionTimeSeconds",  # sic: v1beta1's JSON name
    "accumulatedPastExecutionTimeSeconds",
    "schedulingStats",
    "clusterName",
    "unhealthyNodes",
    "preemptionGates",
)


class WorkloadInputError(ValueError):
    """A Workload the dispatcher cannot read (a bad quantity, an unknown residency policy)."""


@dataclass(frozen=True, slots=True)
class PodSetAsk:
    name: str
    count: int
    cpu: float  # per pod, cores
    memory_gib: float  # per pod
    gpus: float  # per pod
    arch: Arch


@dataclass(frozen=True, slots=True)
class WorkloadAsk:
    key: str  # namespace/name
    pod_sets: tuple[PodSetAsk, ...]
    residency: tuple[ResidencyPolicy, ...]  # every policy must allow a cluster's site
    capacity_types: tuple[CapacityType, ...]


@dataclass(frozen=True, slots=True)
class WorkerCluster:
    """A MultiKueueCluster and the broker site it runs in (None when nothing maps it)."""

    name: str
    site: str | None
    active: bool = True


@dataclass(frozen=True, slots=True)
class Ranking:
    ordered: tuple[str, ...]  # candidates, preferred first
    cost_per_hour: Mapping[str, float]  # candidate -> USD/h (absent: a cluster of unknown site)
    excluded: Mapping[str, str] = field(default_factory=dict)  # cluster -> why it is not a candidate
    restarted: bool = False  # every candidate had rejected the workload: the list starts over


# ---- reading a Workload -----------------------------------------------------------------


def _quantity(value: Any, where: str) -> float:
    try:
        return float(parse_quantity(value))  # type: ignore[no-untyped-call]
    except (ValueError, TypeError) as exc:
        raise WorkloadInputError(f"{where}: {value!r} is not a Kubernetes quantity") from exc


def _container_requests(c: Mapping[str, Any], where: str) -> tuple[float, float, float]:
    resources = c.get("resources") or {}
    # Kueue (and the scheduler) take the limits where requests are omitted
    req = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    cpu = _quantity(req["cpu"], f"{where}.cpu") if "cpu" in req else 0.0
    mem = _quantity(req["memory"], f"{where}.memory") if "memory" in req else 0.0
    gpu = sum(_quantity(req[g], f"{where}.{g}") for g in _GPU_RESOURCES if g in req)
    return cpu, mem, gpu


def pod_requests(spec: Mapping[str, Any], where: str) -> tuple[float, float, float]:
    """(cores, memory GiB, GPUs) of one pod: the sum over containers, at least the largest init container."""
    total = [0.0, 0.0, 0.0]
    for i, c in enumerate(spec.get("containers") or []):
        for k, v in enumerate(_container_requests(c or {}, f"{where}.containers[{i}].resources")):
            total[k] += v
    for i, c in enumerate(spec.get("initContainers") or []):
        for k, v in enumerate(_container_requests(c or {}, f"{where}.initContainers[{i}].resources")):
            total[k] = max(total[k], v)
    return total[0], total[1] / 2**30, total[2]


def _policies(annotations: Mapping[str, Any], where: str) -> list[ResidencyPolicy]:
    value = annotations.get(RESIDENCY_ANNOTATION)
    if not value:
        return []
    try:
        return [resolve_policy(str(value))]
    except ValueError as exc:
        raise WorkloadInputError(f"{where} annotation {RESIDENCY_ANNOTATION}: {exc}") from exc


def workload_ask(wl: Mapping[str, Any]) -> WorkloadAsk:
    """What a Workload asks for: its pod sets' requests, and the residency policies and capacity
    types named by annotations on the Workload or on a pod set's template (where a Job's pod
    template annotations end up)."""
    meta = wl.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    policies = _policies(annotations, "Workload")
    pod_sets = []
    for i, ps in enumerate((wl.get("spec") or {}).get("podSets") or []):
        template = ps.get("template") or {}
        spec = template.get("spec") or {}
        where = f"spec.podSets[{i}]"
        cpu, mem, gpu = pod_requests(spec, f"{where}.template.spec")
        arch_label = (spec.get("nodeSelector") or {}).get("kubernetes.io/arch", Arch.AMD64.value)
        try:
            arch = Arch(arch_label)
        except ValueError as exc:
            raise WorkloadInputError(f"{where}: nodeSelector kubernetes.io/arch {arch_label!r} is not priced") from exc
        policies += _policies((template.get("metadata") or {}).get("annotations") or {}, where)
        pod_sets.append(PodSetAsk(str(ps.get("name", "main")), int(ps.get("count", 1)), cpu, mem, gpu, arch))
    capacity: tuple[CapacityType, ...] = (CapacityType.ONDEMAND, CapacityType.RESERVED)
    if annotations.get(CAPACITY_ANNOTATION):
        try:
            capacity = tuple(CapacityType(c.strip()) for c in str(annotations[CAPACITY_ANNOTATION]).split(","))
        except ValueError as exc:
            known = ", ".join(c.value for c in CapacityType)
            raise WorkloadInputError(f"Workload annotation {CAPACITY_ANNOTATION}: one or more of {known}") from exc
    return WorkloadAsk(
        key=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        pod_sets=tuple(pod_sets),
        residency=tuple(dict.fromkeys(policies)),
        capacity_types=capacity,
    )


def multikueue_check(wl: Mapping[str, Any], multikueue_checks: Iterable[str]) -> Mapping[str, Any] | None:
    """The Workload's state of its MultiKueue admission check, if it has one."""
    names = set(multikueue_checks)
    for check in (wl.get("status") or {}).get("admissionChecks") or []:
        if check.get("name") in names:
            return dict(check)
    return None


def _condition(wl: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def _true(wl: Mapping[str, Any], kind: str) -> bool:
    c = _condition(wl, kind)
    return c is not None and c.get("status") == "True"


def awaiting_nomination(wl: Mapping[str, Any], check: Mapping[str, Any] | None) -> bool:
    """Kueue's own rule for when a dispatcher nominates: quota reserved on the manager, the
    MultiKueue check Pending, no cluster assigned yet, not finished, not being deleted."""
    if check is None or check.get("state") != "Pending":
        return False
    if (wl.get("metadata") or {}).get("deletionTimestamp") or _true(wl, "Finished"):
        return False
    return _true(wl, "QuotaReserved") and not (wl.get("status") or {}).get("clusterName")


def nominated(wl: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple((wl.get("status") or {}).get("nominatedClusterNames") or ())


def rejected(wl: Mapping[str, Any]) -> tuple[str, ...]:
    """Clusters that evicted the Workload before (recorded by the dispatcher in an annotation)."""
    value = ((wl.get("metadata") or {}).get("annotations") or {}).get(REJECTED_ANNOTATION) or ""
    return tuple(c for c in (p.strip() for p in str(value).split(",")) if c)


def rejected_by(wl: Mapping[str, Any], check: Mapping[str, Any] | None, last_cluster: str | None) -> str | None:
    """The worker cluster that just gave the Workload back, if any.

    Kueue marks the MultiKueue check `Retry` while `status.clusterName` still names the worker
    that evicted it, then evicts the Workload on the manager (condition Evicted, reason
    AdmissionCheck), which clears `clusterName`; `last_cluster` is the cluster the caller saw
    last, for when the first step was missed."""
    cluster = (wl.get("status") or {}).get("clusterName")
    if cluster and check is not None and check.get("state") == "Retry":
        return str(cluster)
    if not cluster and last_cluster:
        evicted = _condition(wl, "Evicted")
        if evicted and evicted.get("status") == "True" and evicted.get("reason") == EVICTED_BY_CHECK:
            return last_cluster
    return None


# ---- pricing and ranking ----------------------------------------------------------------


def site_costs(ask: WorkloadAsk, table: PoolTable, sites: Iterable[str]) -> dict[str, float]:
    """USD per hour of the whole Workload at each site: every pod set on the site's cheapest pool
    that fits it (a burstable pool at its sustained baseline: the table's allocatable capacity;
    accelerated and HPC pools only for pod sets with GPUs, docs/solver.md "Node classes"; nodes =
    ceil(pods / pods per node), within the pool's node limit); inf where a
    pod set fits no pool of the allowed capacity types and architecture."""
    wanted = [s for s in dict.fromkeys(sites) if s in table.site_index]
    out = {s: math.inf for s in dict.fromkeys(sites)}
    if not wanted:
        return out
    position = np.full(table.n_sites, -1, dtype=np.int64)
    for i, s in enumerate(wanted):
        position[table.site_index[s]] = i
    cap_ok = np.isin(table.cap_idx, [CAPACITY_TYPES.index(c) for c in ask.capacity_types])
    base = (position[table.site_idx] >= 0) & cap_ok
    totals = np.zeros(len(wanted))
    for ps in ask.pod_sets:
        if ps.count <= 0:
            continue
        ok = base & (table.arch_idx == ARCHES.index(ps.arch))
        if ps.gpus <= 0:  # as placements: no accelerated or HPC node for pods that ask for no accelerator
            ok &= ~np.isin(table.node_class_idx, [NODE_CLASSES.index(c) for c in OPT_IN_CLASSES])
        idx = np.flatnonzero(ok)
        per_node = np.full(len(idx), float(PODS_PER_NODE))
        for need, have in ((ps.cpu, table.vcpus), (ps.memory_gib, table.memory_gib), (ps.gpus, table.gpus)):
            if need > 0:
                per_node = np.minimum(per_node, np.floor(have[idx] / need + 1e-9))
        fits = per_node >= 1
        nodes = np.where(fits, np.ceil(ps.count / np.maximum(per_node, 1.0)), np.inf)
        cost = np.where(fits & (nodes <= table.max_nodes[idx]), nodes * table.price[idx], np.inf)
        best = np.full(len(wanted), np.inf)
        np.minimum.at(best, position[table.site_idx[idx]], cost)
        totals += best
    out.update({s: float(totals[i]) for i, s in enumerate(wanted)})
    return out


def rank(
    ask: WorkloadAsk,
    clusters: Sequence[WorkerCluster],
    costs: Mapping[str, float],
    sites: Mapping[str, Site],
    rejected_clusters: Iterable[str] = (),
) -> Ranking:
    """The Workload's candidate clusters, cheapest first (ties by name), then clusters of unknown
    site (unpriced, by name; only when no residency policy applies, since an unknown site cannot
    be shown to comply). Inactive clusters, clusters of a forbidden site, clusters where the
    Workload fits no pool and clusters that rejected it are left out; when rejections alone
    leave nothing, they are forgotten and the list starts over (capacity comes back)."""
    excluded: dict[str, str] = {}
    priced: list[tuple[float, str]] = []
    unpriced: list[str] = []
    refused = set(rejected_clusters)
    held_back: list[str] = []
    for c in sorted(clusters, key=lambda c: c.name):
        if not c.active:
            excluded[c.name] = "inactive (MultiKueueCluster condition Active is not True)"
            continue
        site = sites.get(c.site) if c.site else None
        if site is None:
            if ask.residency:
                what = f"site {c.site!r} is not in the catalog" if c.site else f"no {SITE_ANNOTATION} annotation"
                excluded[c.name] = f"{what}: residency cannot be checked"
                continue
            unpriced.append(c.name)
        else:
            forbidding = [p.name for p in ask.residency if not p.allows(site)]
            if forbidding:
                excluded[c.name] = f"residency {', '.join(forbidding)}: site {site.id} ({site.country}) not allowed"
                continue
            cost = costs.get(site.id, math.inf)
            if not math.isfinite(cost):
                excluded[c.name] = f"no pool at {site.id} fits the pod sets"
                continue
            priced.append((cost, c.name))
        if c.name in refused:
            held_back.append(c.name)
    order = [n for _, n in sorted(priced)] + unpriced
    restarted = bool(order) and all(n in refused for n in order)
    if not restarted:
        for n in held_back:
            excluded[n] = "rejected the workload before (evicted it)"
        order = [n for n in order if n not in refused]
    by_name = {n: cost for cost, n in priced}
    return Ranking(tuple(order), {n: by_name[n] for n in order if n in by_name}, excluded, restarted)


def nomination(ranking: Ranking, width: int) -> list[str]:
    """The first `width` candidates, at most MAX_NOMINATED."""
    return list(ranking.ordered[: max(0, min(width, MAX_NOMINATED))])


# ---- writing ----------------------------------------------------------------------------


def owned_by_kueue(wl: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(status fields, condition types) Kueue's admission manager holds by apply, from the
    Workload's managedFields (`k:{"type":"QuotaReserved"}` keys the conditions list)."""
    fields: set[str] = set()
    conditions: set[str] = set()
    for entry in (wl.get("metadata") or {}).get("managedFields") or []:
        if (entry.get("manager"), entry.get("operation"), entry.get("subresource")) != (
            FIELD_MANAGER,
            "Apply",
            "status",
        ):
            continue
        status = (entry.get("fieldsV1") or {}).get("f:status") or {}
        fields |= {k[2:] for k in status if k.startswith("f:")}
        for key in status.get("f:conditions") or {}:
            if key.startswith("k:"):
                try:
                    conditions.add(str(json.loads(key[2:]).get("type")))
                except (ValueError, AttributeError):
                    continue
    return fields, conditions


def status_apply(wl: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The server-side apply body for Kueue's admission status with `names` nominated.

    It carries the admission fields Kueue's manager writes (those its managedFields show, and
    those Kueue's admission apply always sends), at their current values, so the apply under that
    manager changes the nomination only; metadata.resourceVersion makes a stale write fail with
    409 instead of resurrecting values Kueue has changed since."""
    meta = wl["metadata"]
    current = wl.get("status") or {}
    owned_fields, owned_conditions = owned_by_kueue(wl)
    keep = (set(ADMISSION_FIELDS) | owned_fields) - {"conditions", "nominatedClusterNames"}
    status: dict[str, Any] = {k: copy.deepcopy(current[k]) for k in sorted(keep) if k in current}
    kinds = ADMISSION_CONDITIONS | owned_conditions
    conditions = [copy.deepcopy(c) for c in current.get("conditions") or [] if c.get("type") in kinds]
    if conditions:
        status["conditions"] = conditions
    if names:
        status["nominatedClusterNames"] = list(names)[:MAX_NOMINATED]
    return {
        "apiVersion": wl.get("apiVersion", f"{GROUP}/v1beta1"),
        "kind": "Workload",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "status": status,
    }


def reason(ranking: Ranking, names: Sequence[str]) -> str:
    """One line for an Event: what was nominated at what cost, and why others were left out."""
    parts = [
        f"{n} ({ranking.cost_per_hour[n]:.4g} USD/h)" if n in ranking.cost_per_hour else f"{n} (unpriced)"
        for n in names
    ]
    text = f"nominated {', '.join(parts)}" if parts else "no worker cluster can take this workload"
    if ranking.restarted:
        text += "; every candidate had rejected it, starting over"
    if ranking.excluded:
        text += "; left out: " + "; ".join(f"{n}: {why}" for n, why in sorted(ranking.excluded.items()))
    return text[:1024]


def configured_dispatcher(config_text: str) -> str | None:
    """`multiKueue.dispatcherName` from Kueue's Configuration (the manager ConfigMap's
    controller_manager_config.yaml); None when unset (Kueue's AllAtOnce default)."""
    try:
        doc = yaml.safe_load(config_text) or {}
    except yaml.YAMLError as exc:
        raise WorkloadInputError(f"Kueue's configuration is not YAML: {exc}") from exc
    value = ((doc.get("multiKueue") or {}) if isinstance(doc, dict) else {}).get("dispatcherName")
    return str(value) if value else None
