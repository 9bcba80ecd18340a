"""kube-scheduler extender: filter and score one cluster's nodes by what the broker knows of their pools.

The protocol is k8s.io/kube-scheduler/extender/v1. Its Go types carry no json tags, so the
scheduler sends and expects capitalised field names (`Pod`, `Nodes`, `NodeNames`, `FailedNodes`,
`Host`, `Score`); some older clients and hand-written ones send lower-case names, so both are read
and the capitalised ones written.

A node is mapped to a catalog pool by its well-known labels (provider from `spec.providerID`,
region, instance type, capacity type); a private or edge node names its site in an annotation and
belongs to the site's reserved pool of its instance type (owned nodes). A pod says what the broker
decided for it in annotations the dispatcher writes (`placement-broker.dev/pool`) and, optionally,
which residency policy binds it (`placement-broker.dev/residency`):

* filter: nodes in a site the pod's residency policy forbids fail, unresolvably (no preemption on
  that node can help); every other node passes, so the extender never strands a pod the broker
  knows nothing about.
* prioritize: the nodes dispatch pins the pod's chosen pool to score the maximum (a public cloud's
  reserved pool is on-demand nodes, a Local Zone's pool nodes of its parent region: labels tell no
  more apart); other known nodes score by what a replica of this pod costs there (cheapest
  highest); nodes of unknown pools score 0.

Malformed arguments raise ExtenderInputError naming the field and what it should be
(`Pod.spec.containers: expected a list`); absent and null fields read as empty, as Go's decoder
reads them.

Pure: the caller passes the sites and a price lookup; nothing here reads the store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from broker.core.domain import ResidencyPolicy, Site
from broker.core.residency import resolve_policy
from broker.dispatch.manifests import OWNED_PROVIDERS, node_capacity, pool_parts, site_region

MAX_PRIORITY = 10  # extenderv1.MaxExtenderPriority
PREFIX = "placement-broker.dev"
POOL_ANNOTATION = f"{PREFIX}/pool"
RESIDENCY_ANNOTATION = f"{PREFIX}/residency"

# spec.providerID scheme -> the broker's provider name
_PROVIDER_SCHEMES = {"aws": "aws", "azure": "azure", "gce": "gcp"}
_REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
_INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
# the broker's own node label, in the contract's words or as dispatch labels pods (capacity_label)
_OWN_CAPACITY = {
    "ondemand": "ondemand",
    "on-demand": "ondemand",
    "spot": "spot",
    "reserved": "reserved",
    "reserved-instance": "reserved",
    "owned": "reserved",
}


class ExtenderInputError(ValueError):
    """The scheduler's arguments are not an ExtenderArgs document."""


@dataclass(frozen=True, slots=True)
class NodePool:
    """Which catalog pool a node belongs to, read off its labels."""

    node: str
    site: str | None  # "aws:eu-central-1"; None when the node's provider or region is unknown
    pool: str | None  # "aws:eu-central-1/m6i.xlarge/spot"


@dataclass(frozen=True, slots=True)
class PodAsk:
    name: str
    cpu: float  # cores requested, summed over containers (init containers: their maximum)
    memory_gib: float
    chosen_pool: str | None
    residency: ResidencyPolicy | None


@dataclass(frozen=True, slots=True)
class FilterResult:
    passed: list[str]
    failed: dict[str, str]
    unresolvable: dict[str, str]


def field(doc: Mapping[str, Any], name: str) -> Any:
    """A field by its upstream (capitalised) name, or the lower-case name older clients send."""
    if name in doc:
        return doc[name]
    return doc.get(name[0].lower() + name[1:], doc.get(name.lower()))


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ExtenderInputError(f"{where}: expected an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ExtenderInputError(f"{where}: expected a list")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ExtenderInputError(f"{where}: expected a string")
    return value


def _strings(value: Any, where: str) -> Mapping[str, str]:
    """Labels or annotations: an object of strings."""
    doc = _object(value, where)
    for key, v in doc.items():
        _string(v, f"{where}[{key!r}]")
    return doc


def parse_args(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]] | None, list[str]]:
    """read_args of a request body."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ExtenderInputError(f"ExtenderArgs is not JSON: {exc}") from exc
    return read_args(doc)


def read_args(doc: Any) -> tuple[dict[str, Any], list[dict[str, Any]] | None, list[str]]:
    """(pod, node objects or None, node names) from an ExtenderArgs document."""
    if not isinstance(doc, Mapping):
        raise ExtenderInputError("ExtenderArgs must be a JSON object")
    pod = field(doc, "Pod")
    if not isinstance(pod, Mapping):
        raise ExtenderInputError("ExtenderArgs.Pod is missing or not an object")
    node_list = field(doc, "Nodes")
    nodes: list[dict[str, Any]] | None = None
    if node_list is not None:
        items = node_list.get("items") if isinstance(node_list, Mapping) else None
        if not isinstance(items, list) or not all(isinstance(n, Mapping) for n in items):
            raise ExtenderInputError("ExtenderArgs.Nodes must be a NodeList with an items array")
        nodes = [dict(n) for n in items]
    names_raw = field(doc, "NodeNames")
    if nodes is None and names_raw is None:
        raise ExtenderInputError("ExtenderArgs needs Nodes or NodeNames")
    if nodes is not None:
        names = [_node_name(n, f"Nodes.items[{i}]") for i, n in enumerate(nodes)]
    elif isinstance(names_raw, list) and all(isinstance(n, str) for n in names_raw):
        names = list(names_raw)
    else:
        raise ExtenderInputError("ExtenderArgs.NodeNames must be an array of strings")
    return dict(pod), nodes, names


def _node_name(node: Mapping[str, Any], where: str) -> str:
    return _string(_object(node.get("metadata"), f"{where}.metadata").get("name"), f"{where}.metadata.name")


def _quantity(value: Any, where: str) -> float:
    try:
        return float(parse_quantity(value))  # type: ignore[no-untyped-call]
    except (ValueError, TypeError) as exc:
        raise ExtenderInputError(f"{where}: {value!r} is not a Kubernetes quantity") from exc


def _requests(containers: Any, where: str) -> tuple[float, float, float, float]:
    """(summed cpu, summed memory bytes, largest cpu, largest memory bytes) over the containers."""
    cpu = mem = 0.0
    peak_cpu = peak_mem = 0.0
    for i, c in enumerate(_list(containers, where)):
        resources = _object(_object(c, f"{where}[{i}]").get("resources"), f"{where}[{i}].resources")
        req = _object(resources.get("requests"), f"{where}[{i}].resources.requests")
        c_cpu = _quantity(req["cpu"], f"{where}[{i}].resources.requests.cpu") if "cpu" in req else 0.0
        c_mem = _quantity(req["memory"], f"{where}[{i}].resources.requests.memory") if "memory" in req else 0.0
        cpu, mem = cpu + c_cpu, mem + c_mem
        peak_cpu, peak_mem = max(peak_cpu, c_cpu), max(peak_mem, c_mem)
    return cpu, mem, peak_cpu, peak_mem


def pod_ask(pod: Mapping[str, Any]) -> PodAsk:
    """What the pod requests (kube-scheduler's rule: sum of containers, at least the largest init
    container) and what the broker decided for it."""
    meta = _object(pod.get("metadata"), "Pod.metadata")
    spec = _object(pod.get("spec"), "Pod.spec")
    cpu, mem, _, _ = _requests(spec.get("containers"), "Pod.spec.containers")
    _, _, init_cpu, init_mem = _requests(spec.get("initContainers"), "Pod.spec.initContainers")
    annotations = _strings(meta.get("annotations"), "Pod.metadata.annotations")
    namespace = _string(meta.get("namespace"), "Pod.metadata.namespace") or "default"
    name = _string(meta.get("name"), "Pod.metadata.name")
    residency = None
    if annotations.get(RESIDENCY_ANNOTATION):
        try:
            residency = resolve_policy(annotations[RESIDENCY_ANNOTATION])
        except ValueError as exc:
            raise ExtenderInputError(f"Pod annotation {RESIDENCY_ANNOTATION}: {exc}") from exc
    return PodAsk(
        name=f"{namespace}/{name}",
        cpu=max(cpu, init_cpu),
        memory_gib=max(mem, init_mem) / 2**30,
        chosen_pool=annotations.get(POOL_ANNOTATION) or None,
        residency=residency,
    )


def _capacity_type(provider: str, labels: Mapping[str, str]) -> str:
    if provider in OWNED_PROVIDERS:
        return "reserved"  # owned nodes: a private or edge site's only pools
    own = _OWN_CAPACITY.get(labels.get(f"{PREFIX}/capacity-type", ""))
    if own:
        return own
    karpenter = labels.get("karpenter.sh/capacity-type")
    if karpenter:
        return "spot" if karpenter == "spot" else "ondemand"
    if labels.get("eks.amazonaws.com/capacityType") == "SPOT":
        return "spot"
    if labels.get("cloud.google.com/gke-spot") == "true" or labels.get("cloud.google.com/gke-preemptible") == "true":
        return "spot"
    if labels.get("kubernetes.azure.com/scalesetpriority") == "spot":
        return "spot"
    return "ondemand"


def node_pools(nodes: Sequence[Mapping[str, Any]]) -> list[NodePool]:
    """node_pool of each of ExtenderArgs' Nodes.items."""
    return [node_pool(n, f"Nodes.items[{i}]") for i, n in enumerate(nodes)]


def node_pool(node: Mapping[str, Any], where: str = "node") -> NodePool:
    meta = _object(node.get("metadata"), f"{where}.metadata")
    labels = _strings(meta.get("labels"), f"{where}.metadata.labels")
    name = _string(meta.get("name"), f"{where}.metadata.name")
    # an annotation: a label value cannot hold the ":" of a site id
    site: str | None = _strings(meta.get("annotations"), f"{where}.metadata.annotations").get(f"{PREFIX}/site")
    if not site:
        spec = _object(node.get("spec"), f"{where}.spec")
        scheme = _string(spec.get("providerID"), f"{where}.spec.providerID").partition("://")[0]
        provider = _PROVIDER_SCHEMES.get(scheme)
        region = next((labels[k] for k in _REGION_LABELS if labels.get(k)), None)
        site = f"{provider}:{region}" if provider and region else None
    instance = next((labels[k] for k in _INSTANCE_LABELS if labels.get(k)), None)
    pool = f"{site}/{instance}/{_capacity_type(site.partition(':')[0], labels)}" if site and instance else None
    return NodePool(node=name, site=site, pool=pool)


def filter_nodes(ask: PodAsk, nodes: Sequence[NodePool], sites: Mapping[str, Site]) -> FilterResult:
    passed: list[str] = []
    unresolvable: dict[str, str] = {}
    for n in nodes:
        site = sites.get(n.site) if n.site else None
        if ask.residency is not None and site is not None and not ask.residency.allows(site):
            unresolvable[n.node] = f"residency {ask.residency.name}: site {site.id} ({site.country}) not allowed"
        else:
            passed.append(n.node)
    return FilterResult(passed=passed, failed={}, unresolvable=unresolvable)


PoolLookup = Callable[[str], tuple[float, float, float] | None]  # pool id -> (price/h, vcpus, memory GiB)


def replica_cost(ask: PodAsk, pool: tuple[float, float, float]) -> float:
    """What one replica of the pod costs on a node of the pool: the node's price over how many fit."""
    price, vcpus, mem = pool
    fits = min(vcpus / ask.cpu if ask.cpu > 0 else math.inf, mem / ask.memory_gib if ask.memory_gib > 0 else math.inf)
    if not math.isfinite(fits):
        fits = vcpus  # a pod that requests nothing: cost per vCPU orders nodes sensibly
    return price / fits if fits >= 1 else math.inf


def node_selection(pool_id: str) -> tuple[str, str, str] | None:
    """What of a pool the node selector dispatch writes can tell apart: (site, or a public cloud's
    region, as its nodes are labelled; instance type; capacity type of its nodes). Pools that agree
    run on the same nodes. None for text that is not a pool id."""
    try:
        site, instance_type, capacity = pool_parts(pool_id)
    except ValueError:
        return None
    provider = site.partition(":")[0]
    region = site_region(site)
    return (f"{provider}:{region}" if region else site), instance_type, node_capacity(provider, capacity)


def prioritize(ask: PodAsk, nodes: Sequence[NodePool], lookup: PoolLookup) -> list[tuple[str, int]]:
    costs: dict[str, float] = {}
    for n in nodes:
        info = lookup(n.pool) if n.pool else None
        if info is not None:
            costs[n.node] = replica_cost(ask, info)
    chosen = node_selection(ask.chosen_pool) if ask.chosen_pool else None
    finite = [c for c in costs.values() if math.isfinite(c)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    out: list[tuple[str, int]] = []
    for n in nodes:
        if chosen is not None and n.pool is not None and node_selection(n.pool) == chosen:
            score = MAX_PRIORITY
        elif n.node not in costs or not math.isfinite(costs[n.node]):
            score = 0
        elif hi <= lo:
            score = MAX_PRIORITY - 1
        else:
            # 1..9: the chosen pool keeps the top score to itself, unknown pools stay below everything priced
            score = 1 + round((MAX_PRIORITY - 2) * (hi - costs[n.node]) / (hi - lo))
        out.append((n.node, score))
    return out
