"""What to run where: Kubernetes manifests for a stored placement (pure, no I/O).

Every assignment (workload x pool) becomes one Deployment per target cluster of
its site, pinned to the pool's nodes with well-known node labels, or the
user's own manifest template for the workload with the same fields imposed.
"""

from __future__ import annotations

import copy
import hashlib
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from broker.core.placement import Placement
from broker.errors import InvalidRequest

PREFIX = "placement-broker.dev"
MANAGED_BY = "placement-broker"
# Placeholder image when neither a template nor an image is given: the manifest is
# still a complete, schedulable Deployment that reserves the planned capacity.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
TEMPLATE_KINDS = ("Deployment", "StatefulSet")

# Karpenter's capacity-type values differ from the contract's capacity types, and so does
# their meaning: Karpenter's `reserved` is an EC2 capacity reservation (ODCR), while a public
# cloud's reserved pool is priced by a Reserved Instance or savings plan, billing constructs
# applied to on-demand instances. Its nodes are on-demand ones to Karpenter.
_KARPENTER_CAPACITY = {"ondemand": "on-demand", "spot": "spot"}  # of node_capacity()
OWNED_PROVIDERS = ("private", "edge")
CLOUD_PROVIDERS = ("aws", "azure", "gcp")
# an AWS Local Zone or Wavelength Zone site names its zone group (us-east-1-bos-1,
# us-east-1-wl1-bos1); its nodes carry the parent region as topology.kubernetes.io/region
_AWS_ZONE_GROUP = re.compile(r"^((?:[a-z]{2}|us-gov)-[a-z]+-\d)-.+$")
HOSTNAME = "kubernetes.io/hostname"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def capacity_label(provider: str, capacity: str) -> str:
    """The `placement-broker.dev/capacity-type` label value: what the capacity is. A reserved
    pool is a commitment on a public cloud and owned hardware at a private or edge site."""
    if capacity == "reserved":
        return "owned" if provider in OWNED_PROVIDERS else "reserved-instance"
    return capacity


def node_capacity(provider: str, capacity: str) -> str:
    """The capacity type of the nodes a pool's pods are pinned to, as far as node labels tell it:
    a public cloud's reserved pool runs on on-demand nodes (its price is a billing construct), and
    every pool of a private or edge site is reserved (owned nodes). The scheduler extender reads
    nodes by the same rule, so a pool's pods score highest on the nodes selected here."""
    if provider in OWNED_PROVIDERS:
        return "reserved"
    return "ondemand" if capacity == "reserved" else capacity


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """The per-replica requests of a workload, as stored with the placement's request."""

    name: str
    cpu: float
    memory_gib: float
    gpus: float = 0.0
    arch: tuple[str, ...] = ("amd64",)
    max_per_node: int | None = None  # spread.max_per_node: replicas one node may run at most

    @classmethod
    def from_request(cls, doc: Mapping[str, Any]) -> WorkloadSpec:
        limit = (doc.get("spread") or {}).get("max_per_node")
        return cls(
            name=str(doc["name"]),
            cpu=float(doc["cpu"]),
            memory_gib=float(doc["memory_gib"]),
            gpus=float(doc.get("gpus") or 0.0),
            arch=tuple(str(a) for a in (doc.get("arch") or ["amd64"])),
            max_per_node=None if limit is None else int(limit),
        )


@dataclass(frozen=True, slots=True)
class Target:
    """One registered cluster of a site."""

    cluster: str
    site: str
    namespace: str


@dataclass(frozen=True, slots=True)
class ClusterBundle:
    """Everything one cluster should run for one placement (the outbox payload)."""

    cluster: str
    namespace: str
    app: str  # slug of the placement name: scopes pruning to this application
    placement_id: str
    manifests: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "namespace": self.namespace,
            "app": self.app,
            "placement_id": self.placement_id,
            "manifests": list(self.manifests),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ClusterBundle:
        return cls(
            cluster=str(doc["cluster"]),
            namespace=str(doc["namespace"]),
            app=str(doc["app"]),
            placement_id=str(doc["placement_id"]),
            manifests=tuple(doc["manifests"]),
        )

    def replicas(self) -> dict[str, int]:
        return {m["metadata"]["name"]: int(m["spec"]["replicas"]) for m in self.manifests}


def dns_label(text: str, max_len: int = 63) -> str:
    """An RFC 1123 label from any text; names cut to length keep a hash so they stay distinct
    (names that only clean up alike, "api.v2" and "API_v2", do not: see _name_clashes)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
    if len(slug) <= max_len:
        return slug
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{slug[: max_len - 9].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    """A valid label value (<= 63 chars of [A-Za-z0-9_.-], alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63].strip("-_.")
    return value or "none"


def pool_parts(pool_id: str) -> tuple[str, str, str]:
    """'aws:eu-central-1/m6i.xlarge/spot' -> (site, instance type, capacity type)."""
    site, _, rest = pool_id.partition("/")
    instance_type, _, capacity = rest.rpartition("/")
    if not site or not instance_type or not capacity:
        raise ValueError(f"not a pool id: {pool_id!r}")
    return site, instance_type, capacity


def site_region(site: str) -> str | None:
    """The `topology.kubernetes.io/region` of a public cloud site's nodes; None for private and
    edge sites, whose nodes are labelled by whoever runs them."""
    provider, _, region = site.partition(":")
    if provider not in CLOUD_PROVIDERS or not region:
        return None
    group = _AWS_ZONE_GROUP.match(region) if provider == "aws" else None
    return group.group(1) if group else region


def node_placement(
    provider: str, instance_type: str, capacity: str, arch: str, *, region: str | None = None
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """nodeSelector and tolerations that pin pods to the pool's nodes on each provider: instance
    type, architecture, capacity type and, on public clouds, the region (the catalog knows no
    availability zones: regions collapse them, and an AWS Local Zone site is a zone group)."""
    selector = {"node.kubernetes.io/instance-type": instance_type, "kubernetes.io/arch": arch}
    if region is not None:
        selector["topology.kubernetes.io/region"] = region
    tolerations: list[dict[str, str]] = []
    if provider == "aws":
        selector["karpenter.sh/capacity-type"] = _KARPENTER_CAPACITY[node_capacity(provider, capacity)]
    elif provider == "gcp" and capacity == "spot":
        selector["cloud.google.com/gke-spot"] = "true"
        tolerations.append(
            {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        )
    elif provider == "azure" and capacity == "spot":
        # AKS taints spot node pools; without the toleration nothing would schedule there
        selector["kubernetes.azure.com/scalesetpriority"] = "spot"
        tolerations.append(
            {
                "key": "kubernetes.azure.com/scalesetpriority",
                "operator": "Equal",
                "value": "spot",
                "effect": "NoSchedule",
            }
        )
    return selector, tolerations


def node_exclusions(provider: str, capacity: str) -> list[dict[str, str]]:
    """Node labels an on-demand or reserved pod must not land on. GKE leaves Spot and preemptible
    node pools untainted unless asked, so a pod without a toleration can still be scheduled there;
    AKS taints its spot pools and Karpenter's selector names the capacity type, so they need none."""
    if provider == "gcp" and capacity != "spot":
        return [
            {"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"},
            {"key": "cloud.google.com/gke-preemptible", "operator": "DoesNotExist"},
        ]
    return []


def _require_node(pod_spec: dict[str, Any], expressions: list[dict[str, str]]) -> None:
    """AND the expressions into the pod's required node affinity: into each of a template's own
    terms (terms are ORed), or as the one term."""
    affinity = dict(pod_spec.get("affinity") or {})
    node = dict(affinity.get("nodeAffinity") or {})
    required = dict(node.get(_REQUIRED) or {})
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or []] or [{}]
    for t in terms:
        t["matchExpressions"] = [*(t.get("matchExpressions") or []), *expressions]
    required["nodeSelectorTerms"] = terms
    node[_REQUIRED] = required
    affinity["nodeAffinity"] = node
    pod_spec["affinity"] = affinity


def resource_requests(spec: WorkloadSpec) -> dict[str, Any]:
    requests: dict[str, str] = {
        "cpu": f"{round(spec.cpu * 1000)}m",
        "memory": f"{round(spec.memory_gib * 1024)}Mi",
    }
    out: dict[str, Any] = {"requests": requests}
    if spec.gpus > 0:
        # extended resources must be whole and have limits equal to requests
        gpus = str(max(1, int(-(-spec.gpus // 1))))
        requests["nvidia.com/gpu"] = gpus
        out["limits"] = {"nvidia.com/gpu": gpus}
    return out


@dataclass(frozen=True, slots=True)
class _Row:
    """One Deployment to write: an assignment's share on one cluster."""

    workload: WorkloadSpec
    pool: str
    site: str
    provider: str
    instance_type: str
    capacity: str
    arch: str
    replicas: int
    cost_per_hour: float
    target: Target


def split_replicas(replicas: int, k: int) -> list[int]:
    """Replicas spread as evenly as possible over k clusters (the first ones get the remainder)."""
    base, extra = divmod(replicas, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def build_bundles(
    placement: Placement,
    targets: Mapping[str, Sequence[Target]],
    *,
    pool_arch: Mapping[str, str] | None = None,
    templates: Mapping[str, str] | None = None,
    images: Mapping[str, str] | None = None,
) -> list[ClusterBundle]:
    """One bundle per target cluster, in cluster-name order; raises InvalidRequest on bad input."""
    specs = {w["name"]: WorkloadSpec.from_request(w) for w in placement.request.get("workloads", [])}
    templates = templates or {}
    images = images or {}
    pool_arch = pool_arch or {}
    errors: list[dict[str, Any]] = []
    for kind, names in (("templates", templates), ("images", images)):
        for name in names:
            if name not in specs:
                errors.append({"loc": ["body", kind, name], "msg": f"no workload {name!r} in the placement"})
    errors += _name_clashes(list(specs))
    rows: list[_Row] = []
    for i, a in enumerate(placement.result.assignments):
        clusters = sorted(targets.get(a.site, ()), key=lambda t: t.cluster)
        if not clusters:
            errors.append({"loc": ["assignments", i, "site"], "msg": f"no cluster is registered for site {a.site!r}"})
            continue
        spec = specs[a.workload]
        _, instance_type, capacity = pool_parts(a.pool)
        arch = pool_arch.get(a.pool, spec.arch[0])
        cost = a.explanation.cost_per_hour
        shares = split_replicas(a.replicas, len(clusters))
        for target, n in zip(clusters, shares, strict=True):
            if n > 0:
                rows.append(
                    _Row(
                        spec,
                        a.pool,
                        a.site,
                        a.site.split(":", 1)[0],
                        instance_type,
                        capacity,
                        arch,
                        n,
                        cost * n / a.replicas,
                        target,
                    )
                )
    if errors:
        raise InvalidRequest("the placement cannot be dispatched", errors=errors)

    app = dns_label(placement.name or placement.id or "placement")
    pid = placement.id or ""
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    namespaces: dict[str, str] = {}
    for ts in targets.values():
        for t in ts:
            namespaces[t.cluster] = t.namespace
    for row in rows:
        doc = render(row, app=app, placement_id=pid, template=templates.get(row.workload.name))
        if row.workload.name not in templates:
            container = doc["spec"]["template"]["spec"]["containers"][0]
            container["image"] = images.get(row.workload.name, PAUSE_IMAGE)
        by_cluster.setdefault(row.target.cluster, []).append(doc)
    return [ClusterBundle(c, namespaces[c], app, pid, tuple(by_cluster[c])) for c in sorted(by_cluster)]


def _name_clashes(workloads: list[str]) -> list[dict[str, Any]]:
    """Workloads whose names become the same Kubernetes name ("api.v2" and "API_v2" are both
    "api-v2"): their Deployments and GitOps files would overwrite each other's."""
    by_label: dict[str, list[str]] = {}
    for w in workloads:
        by_label.setdefault(dns_label(w), []).append(w)
    return [
        {
            "loc": ["workloads", w],
            "msg": f"workloads {', '.join(map(repr, same))} all become the Kubernetes name {label!r}: "
            "rename all but one to dispatch them",
        }
        for label, same in sorted(by_label.items())
        if len(same) > 1
        for w in same
    ]


def deployment_name(workload: str, instance_type: str, capacity: str) -> str:
    return dns_label(f"{workload}-{instance_type}-{capacity}")


def render(row: _Row, *, app: str, placement_id: str, template: str | None) -> dict[str, Any]:
    name = deployment_name(row.workload.name, row.instance_type, row.capacity)
    selector_labels = {"app.kubernetes.io/name": dns_label(row.workload.name), f"{PREFIX}/deployment": name}
    labels = {
        **selector_labels,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        f"{PREFIX}/app": app,
        f"{PREFIX}/cluster": row.target.cluster,
        f"{PREFIX}/workload": dns_label(row.workload.name),
        f"{PREFIX}/placement-id": label_value(placement_id),
        f"{PREFIX}/capacity-type": capacity_label(row.provider, row.capacity),
    }
    annotations = {
        f"{PREFIX}/placement-id": placement_id,
        f"{PREFIX}/workload": row.workload.name,
        f"{PREFIX}/pool": row.pool,
        f"{PREFIX}/site": row.site,
        f"{PREFIX}/cost-per-hour": f"{row.cost_per_hour:.6f}",
    }
    node_selector, tolerations = node_placement(
        row.provider, row.instance_type, row.capacity, row.arch, region=site_region(row.site)
    )
    if template is not None:
        doc = _from_template(template, row, name=name, placement_id=placement_id)
    else:
        doc = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {},
            "spec": {
                "template": {
                    "metadata": {},
                    "spec": {"containers": [{"name": dns_label(row.workload.name), "image": PAUSE_IMAGE}]},
                }
            },
        }
    meta = doc.setdefault("metadata", {})
    meta["name"] = name
    meta["namespace"] = row.target.namespace
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    spec = doc.setdefault("spec", {})
    for key in ("replicas", "selector"):
        spec.pop(key, None)
    # replicas and selector first: the fields a reviewer of a GitOps diff looks at
    doc["spec"] = spec = {"replicas": row.replicas, "selector": {"matchLabels": selector_labels}, **spec}
    pod = spec.setdefault("template", {})
    pod_meta = pod.setdefault("metadata", {}) or {}
    pod["metadata"] = pod_meta
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **annotations}
    pod_spec = pod.setdefault("spec", {})
    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **node_selector}
    if tolerations:
        pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or []), *tolerations]
    if avoid := node_exclusions(row.provider, row.capacity):
        _require_node(pod_spec, avoid)
    anti, spread = node_spread(row.workload, selector_labels)
    if anti:  # beside a template's own terms
        affinity = dict(pod_spec.get("affinity") or {})
        pod_anti = dict(affinity.get("podAntiAffinity") or {})
        pod_anti[_REQUIRED] = [*(pod_anti.get(_REQUIRED) or []), *anti]
        affinity["podAntiAffinity"] = pod_anti
        pod_spec["affinity"] = affinity
    if spread:
        pod_spec["topologySpreadConstraints"] = [*(pod_spec.get("topologySpreadConstraints") or []), *spread]
    containers = pod_spec.get("containers") or []
    if containers and isinstance(containers[0], dict) and "resources" not in containers[0]:
        containers[0]["resources"] = resource_requests(row.workload)
    return doc


def node_spread(
    spec: WorkloadSpec, selector_labels: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What keeps a workload's replicas within its spread.max_per_node on the cluster, as the
    answer's node assignments do: at 1, pod anti-affinity on the node (a hard rule, exactly the
    plan's); above 1, a topology spread over nodes with that skew, preferred (Kubernetes has no
    hard "at most k per node": the skew counts from the least-loaded eligible node). Returns the
    required anti-affinity terms and the topology spread constraints."""
    if spec.max_per_node is None:
        return [], []
    match = {"matchLabels": dict(selector_labels)}
    if spec.max_per_node == 1:
        return [{"labelSelector": match, "topologyKey": HOSTNAME}], []
    constraint = {
        "maxSkew": spec.max_per_node,
        "topologyKey": HOSTNAME,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": match,
    }
    return [], [constraint]


def _from_template(text: str, row: _Row, *, name: str, placement_id: str) -> dict[str, Any]:
    """The user's manifest with ${...} placeholders filled; the broker then imposes its own fields."""
    where = {"loc": ["body", "templates", row.workload.name]}
    values = {
        "name": name,
        "workload": row.workload.name,
        "namespace": row.target.namespace,
        "replicas": str(row.replicas),
        "placement_id": placement_id,
        "pool": row.pool,
        "site": row.site,
        "cluster": row.target.cluster,
        "instance_type": row.instance_type,
        "capacity_type": row.capacity,
        "arch": row.arch,
    }
    try:
        filled = string.Template(text).substitute(values)
        doc = yaml.safe_load(filled)
    except (KeyError, ValueError, yaml.YAMLError) as exc:
        msg = f"unknown placeholder {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InvalidRequest(
            f"the template of {row.workload.name!r} cannot be rendered: {msg}", errors=[{**where, "msg": msg}]
        ) from exc
    if not isinstance(doc, dict) or doc.get("kind") not in TEMPLATE_KINDS:
        msg = f"a template must be one {' or '.join(TEMPLATE_KINDS)} document"
        raise InvalidRequest(
            f"the template of {row.workload.name!r} is not usable: {msg}", errors=[{**where, "msg": msg}]
        )
    return copy.deepcopy(doc)


def total_replicas(bundles: Sequence[ClusterBundle]) -> dict[str, int]:
    """Replicas per workload over all bundles (the acceptance check: equals the placement)."""
    out: dict[str, int] = {}
    for b in bundles:
        for m in b.manifests:
            wl = m["metadata"]["annotations"][f"{PREFIX}/workload"]
            out[wl] = out.get(wl, 0) + int(m["spec"]["replicas"])
    return out


def to_yaml(docs: Sequence[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False, explicit_start=True)
