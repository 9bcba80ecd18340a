"""Manifests for assignments: node selection per provider, replica split, templates, strict schema."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from broker.dispatch.manifests import (
    PREFIX,
    Target,
    build_bundles,
    dns_label,
    node_placement,
    pool_parts,
    split_replicas,
    total_replicas,
)
from broker.dispatch.schema import check_bundles, problems
from broker.errors import InvalidRequest
from tests.placements import assignment, placement

REQUEST = {
    "name": "shop",
    "workloads": [
        {"name": "Checkout API", "replicas": 5, "cpu": 0.5, "memory_gib": 1.5, "arch": ["arm64", "amd64"]},
        {"name": "trainer", "replicas": 2, "cpu": 8, "memory_gib": 60, "gpus": 0.5},
    ],
}
PLACEMENT = placement(
    [
        assignment("Checkout API", "aws:eu-central-1/m7g.large/spot", 3, 0.12),
        assignment("Checkout API", "gcp:europe-west1/n2-standard-2/spot", 2, 0.05),
        assignment("trainer", "azure:westeurope/Standard_NC4as_T4_v3/spot", 2, 0.4),
    ],
    request=REQUEST,
    id="pl_06H3DDDSJBAFN1A4744KMS3Z1M",
    name="shop rollout",
)
TARGETS = {
    "aws:eu-central-1": [Target("fra-a", "aws:eu-central-1", "shop"), Target("fra-b", "aws:eu-central-1", "shop")],
    "gcp:europe-west1": [Target("bru", "gcp:europe-west1", "shop")],
    "azure:westeurope": [Target("ams", "azure:westeurope", "ml")],
}
ARCH = {"aws:eu-central-1/m7g.large/spot": "arm64"}


@pytest.mark.parametrize(
    ("provider", "capacity", "selector", "toleration_keys"),
    [
        ("aws", "spot", {"karpenter.sh/capacity-type": "spot"}, []),
        ("aws", "ondemand", {"karpenter.sh/capacity-type": "on-demand"}, []),
        # a Reserved Instance is billing on an on-demand instance; Karpenter's `reserved` is an ODCR
        ("aws", "reserved", {"karpenter.sh/capacity-type": "on-demand"}, []),
        ("gcp", "spot", {"cloud.google.com/gke-spot": "true"}, ["cloud.google.com/gke-spot"]),
        ("gcp", "ondemand", {}, []),
        ("azure", "spot", {"kubernetes.azure.com/scalesetpriority": "spot"}, ["kubernetes.azure.com/scalesetpriority"]),
        ("azure", "ondemand", {}, []),
        ("private", "reserved", {}, []),
    ],
)
def test_node_placement_per_provider(
    provider: str, capacity: str, selector: dict[str, str], toleration_keys: list[str]
) -> None:
    sel, tol = node_placement(provider, "x.large", capacity, "arm64")
    assert sel == {"node.kubernetes.io/instance-type": "x.large", "kubernetes.io/arch": "arm64", **selector}
    assert [t["key"] for t in tol] == toleration_keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Checkout API", "checkout-api"), ("orders_db.v2", "orders-db-v2"), ("--x--", "x"), ("!!!", "x")],
)
def test_dns_label(text: str, expected: str) -> None:
    assert dns_label(text) == expected


def test_long_names_stay_distinct_and_short() -> None:
    a, b = dns_label("w" * 80 + "a"), dns_label("w" * 80 + "b")
    assert a != b and len(a) <= 63 and len(b) <= 63


@pytest.mark.parametrize(
    ("replicas", "k", "shares"), [(5, 2, [3, 2]), (2, 3, [1, 1, 0]), (7, 1, [7]), (6, 3, [2, 2, 2])]
)
def test_split_replicas(replicas: int, k: int, shares: list[int]) -> None:
    assert split_replicas(replicas, k) == shares and sum(shares) == replicas


def test_pool_parts_keeps_dots_and_colons() -> None:
    assert pool_parts("aws:eu-central-1/m6i.xlarge/spot") == ("aws:eu-central-1", "m6i.xlarge", "spot")
    with pytest.raises(ValueError):
        pool_parts("not-a-pool")


def test_bundles_match_the_placement_and_validate_strictly() -> None:
    bundles = build_bundles(PLACEMENT, TARGETS, pool_arch=ARCH)
    assert [b.cluster for b in bundles] == ["ams", "bru", "fra-a", "fra-b"]
    assert total_replicas(bundles) == {"Checkout API": 5, "trainer": 2}
    by_cluster = {b.cluster: b for b in bundles}
    assert by_cluster["fra-a"].replicas() == {"checkout-api-m7g-large-spot": 2}
    assert by_cluster["fra-b"].replicas() == {"checkout-api-m7g-large-spot": 1}
    for b in bundles:
        for m in b.manifests:
            assert problems(m) == [], (b.cluster, m["metadata"]["name"])
            assert m["metadata"]["namespace"] == b.namespace
            pod = m["spec"]["template"]
            assert set(m["spec"]["selector"]["matchLabels"].items()) <= set(pod["metadata"]["labels"].items())
            assert m["metadata"]["annotations"][f"{PREFIX}/placement-id"] == PLACEMENT.id
    fra = by_cluster["fra-a"].manifests[0]
    sel = fra["spec"]["template"]["spec"]["nodeSelector"]
    assert sel["kubernetes.io/arch"] == "arm64" and sel["karpenter.sh/capacity-type"] == "spot"
    assert fra["metadata"]["annotations"][f"{PREFIX}/cost-per-hour"] == f"{0.12 * 2 / 3:.6f}"
    gpu = by_cluster["ams"].manifests[0]["spec"]["template"]["spec"]
    res = gpu["containers"][0]["resources"]
    assert res["limits"] == {"nvidia.com/gpu": "1"} and res["requests"]["memory"] == "61440Mi"
    assert gpu["tolerations"][0]["key"] == "kubernetes.azure.com/scalesetpriority"
    check_bundles(bundles)  # raises on any violation


def test_a_site_without_cluster_is_a_clear_error() -> None:
    targets = {k: v for k, v in TARGETS.items() if k != "gcp:europe-west1"}
    with pytest.raises(InvalidRequest) as exc:
        build_bundles(PLACEMENT, targets)
    assert exc.value.errors == [
        {"loc": ["assignments", 1, "site"], "msg": "no cluster is registered for site 'gcp:europe-west1'"}
    ]


def test_workloads_whose_names_clean_up_alike_are_refused_not_merged() -> None:
    """'api.v2' and 'API_v2' are both 'api-v2': their Deployments and GitOps files would
    overwrite each other's, and two of the five replicas would be lost."""
    request = {
        "name": "shop",
        "workloads": [
            {"name": "api.v2", "replicas": 2, "cpu": 0.5, "memory_gib": 1},
            {"name": "API_v2", "replicas": 3, "cpu": 0.5, "memory_gib": 1},
        ],
    }
    clash = placement(
        [
            assignment("api.v2", "aws:eu-central-1/t3a.medium/spot", 2, 0.02),
            assignment("API_v2", "aws:eu-central-1/t3a.medium/spot", 3, 0.03),
        ],
        request=request,
        id="pl_06H3DDDSJBAFN1A4744KMS3Z1N",
        name="shop",
    )
    with pytest.raises(InvalidRequest) as exc:
        build_bundles(clash, TARGETS)
    assert [e["loc"] for e in exc.value.errors] == [["workloads", "api.v2"], ["workloads", "API_v2"]]
    assert "'api.v2', 'API_v2' all become the Kubernetes name 'api-v2'" in exc.value.errors[0]["msg"]


TEMPLATE = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ignored
  labels: {team: payments}
spec:
  replicas: 99
  selector: {matchLabels: {app: wrong}}
  template:
    metadata: {labels: {team: payments}}
    spec:
      containers:
        - name: api
          image: ghcr.io/acme/checkout:1.4
          env: [{name: POOL, value: "${pool}"}, {name: SITE, value: "${site}"}]
"""


def test_template_keeps_user_fields_and_imposes_the_brokers() -> None:
    bundles = build_bundles(PLACEMENT, TARGETS, templates={"Checkout API": TEMPLATE})
    m = next(b for b in bundles if b.cluster == "bru").manifests[0]
    c = m["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "ghcr.io/acme/checkout:1.4"
    assert {"name": "POOL", "value": "gcp:europe-west1/n2-standard-2/spot"} in c["env"]
    assert m["spec"]["replicas"] == 2 and m["metadata"]["labels"]["team"] == "payments"
    assert m["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "checkout-api"
    assert c["resources"]["requests"] == {"cpu": "500m", "memory": "1536Mi"}
    check_bundles(bundles)


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        (TEMPLATE.replace("${pool}", "${nope}"), "placeholder"),
        ("kind: ConfigMap\napiVersion: v1\n", "Deployment or StatefulSet"),
        ("a: [unclosed", "cannot be rendered"),
        (TEMPLATE.replace("image: ghcr.io/acme/checkout:1.4", "image: x\n          colour: blue"), "colour"),
        (TEMPLATE.replace("replicas: 99", "replicas: 99\n  paused: maybe"), "paused"),
    ],
)
def test_bad_templates_are_rejected_with_the_reason(template: str, needle: str) -> None:
    with pytest.raises(InvalidRequest) as exc:
        check_bundles(build_bundles(PLACEMENT, TARGETS, templates={"Checkout API": template}))
    text = exc.value.detail + " ".join(str(e["msg"]) for e in exc.value.errors)
    assert needle in text
    assert all(e["loc"][:3] == ["body", "templates", "Checkout API"] for e in exc.value.errors)


def test_templates_and_images_for_unknown_workloads_are_rejected() -> None:
    with pytest.raises(InvalidRequest) as exc:
        build_bundles(PLACEMENT, TARGETS, images={"ghost": "x"})
    assert exc.value.errors[0]["loc"] == ["body", "images", "ghost"]


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ((), None),
        (("spec", "template", "spec", "containers", 0, "colour"), "x"),
        (("spec", "replicas"), "three"),
        (("spec", "selector"), None),
        (("metadata", "labels"), {"a": 1}),
    ],
)
def test_cached_validator_agrees_with_kubernetes_validate(path: tuple[Any, ...], value: Any) -> None:
    import kubernetes_validate

    doc = _deployment()
    if path:
        parent: Any = doc
        for p in path[:-1]:
            parent = parent[p]
        if value is None:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    try:
        kubernetes_validate.validate(doc, "1.31", strict=True)
        library_ok = True
    except kubernetes_validate.ValidationError:
        library_ok = False
    assert (problems(doc) == []) == library_ok
    assert library_ok == (path == ())


@pytest.mark.parametrize(
    ("pool", "label", "karpenter"),
    [
        ("aws:eu-central-1/m6i.large/reserved", "reserved-instance", "on-demand"),
        ("aws:eu-central-1/m6i.large/ondemand", "ondemand", "on-demand"),
        ("aws:eu-central-1/m6i.large/spot", "spot", "spot"),
        ("private:fra-dc1/r740-std/reserved", "owned", None),
    ],
)
def test_capacity_labels_say_what_the_capacity_is(pool: str, label: str, karpenter: str | None) -> None:
    site = pool.split("/", 1)[0]
    one = placement([assignment("trainer", pool, 1, 0.1)], request=REQUEST, id="pl_1", name="shop")
    [bundle] = build_bundles(one, {site: [Target("c1", site, "shop")]})
    [m] = bundle.manifests
    assert m["metadata"]["labels"][f"{PREFIX}/capacity-type"] == label
    pod = m["spec"]["template"]
    assert pod["metadata"]["labels"][f"{PREFIX}/capacity-type"] == label
    assert pod["spec"]["nodeSelector"].get("karpenter.sh/capacity-type") == karpenter
    assert problems(m) == []


@pytest.mark.parametrize(
    ("site", "region"),
    [
        ("aws:eu-central-1", "eu-central-1"),
        ("aws:us-gov-west-1", "us-gov-west-1"),
        ("aws:us-east-1-bos-1", "us-east-1"),  # a Local Zone: its nodes carry the parent region
        ("aws:ap-northeast-1-wl1-nrt1", "ap-northeast-1"),  # a Wavelength Zone
        ("azure:westeurope", "westeurope"),
        ("gcp:europe-west1", "europe-west1"),
        ("private:fra-dc1", None),
        ("edge:munich-store-17", None),
    ],
)
def test_public_cloud_pods_are_pinned_to_the_region(site: str, region: str | None) -> None:
    from broker.dispatch.manifests import site_region

    assert site_region(site) == region
    sel, _ = node_placement(site.split(":")[0], "x.large", "ondemand", "amd64", region=site_region(site))
    assert sel.get("topology.kubernetes.io/region") == region


def test_dispatched_pods_carry_the_pools_region() -> None:
    bundles = {b.cluster: b for b in build_bundles(PLACEMENT, TARGETS, pool_arch=ARCH)}
    sel = bundles["bru"].manifests[0]["spec"]["template"]["spec"]["nodeSelector"]
    assert sel["topology.kubernetes.io/region"] == "europe-west1"
    assert sel["node.kubernetes.io/instance-type"] == "n2-standard-2"
    owned = placement(
        [assignment("trainer", "private:fra-dc1/r740-std/reserved", 1, 0.1)], request=REQUEST, id="pl_1", name="x"
    )
    [bundle] = build_bundles(owned, {"private:fra-dc1": [Target("dc", "private:fra-dc1", "shop")]})
    assert "topology.kubernetes.io/region" not in bundle.manifests[0]["spec"]["template"]["spec"]["nodeSelector"]


@pytest.mark.parametrize("limit", [1, 3])
def test_max_per_node_is_dispatched_as_anti_affinity_or_node_spread(limit: int) -> None:
    import kubernetes_validate

    request = {
        "name": "shop",
        "workloads": [{"name": "web", "replicas": 4, "cpu": 0.5, "memory_gib": 1, "spread": {"max_per_node": limit}}],
    }
    one = placement([assignment("web", "aws:eu-central-1/m6i.large/ondemand", 4, 0.4)], request=request, id="pl_2")
    [bundle] = build_bundles(one, {"aws:eu-central-1": [Target("c1", "aws:eu-central-1", "shop")]})
    [m] = bundle.manifests
    pod = m["spec"]["template"]["spec"]
    match = {"matchLabels": m["spec"]["selector"]["matchLabels"]}
    if limit == 1:
        [term] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term == {"labelSelector": match, "topologyKey": "kubernetes.io/hostname"}
        assert "topologySpreadConstraints" not in pod
    else:
        [spread] = pod["topologySpreadConstraints"]
        assert spread == {
            "maxSkew": 3,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": match,
        }
        assert "affinity" not in pod
    assert problems(m) == []
    kubernetes_validate.validate(m, "1.31", strict=True)


def test_without_max_per_node_pods_carry_no_spread() -> None:
    for b in build_bundles(PLACEMENT, TARGETS, pool_arch=ARCH):
        for m in b.manifests:
            pod = m["spec"]["template"]["spec"]
            assert "affinity" not in pod and "topologySpreadConstraints" not in pod


def _template_with_affinity(affinity: dict[str, object]) -> str:
    """A user's Deployment template whose pods carry their own affinity terms."""
    spec = {"affinity": affinity, "containers": [{"name": "web", "image": "nginx"}]}
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "${name}"},
        "spec": {"template": {"spec": spec}},
    }
    return yaml.safe_dump(doc)


def test_a_templates_own_anti_affinity_is_kept_beside_max_per_node() -> None:
    own = {"labelSelector": {"matchLabels": {"tier": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}
    template = _template_with_affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}})
    request = {
        "name": "shop",
        "workloads": [{"name": "web", "replicas": 2, "cpu": 0.5, "memory_gib": 1, "spread": {"max_per_node": 1}}],
    }
    one = placement([assignment("web", "aws:eu-central-1/m6i.large/ondemand", 2, 0.2)], request=request, id="pl_3")
    [bundle] = build_bundles(
        one, {"aws:eu-central-1": [Target("c1", "aws:eu-central-1", "shop")]}, templates={"web": template}
    )
    [m] = bundle.manifests
    terms = m["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms[0] == own and terms[1]["topologyKey"] == "kubernetes.io/hostname"
    assert problems(m) == []


def test_gke_on_demand_and_reserved_pods_keep_off_spot_nodes() -> None:
    """GKE leaves Spot and preemptible node pools untainted unless asked: an on-demand or reserved
    pod needs a required node affinity to stay off them; a spot pod, a template's own node terms
    (each gets the exclusions ANDed in) and other providers are as before."""
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["europe-west1-b"]}
    template = _template_with_affinity(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}
            }
        }
    )
    request = {
        "name": "shop",
        "workloads": [
            {"name": w, "replicas": 1, "cpu": 0.5, "memory_gib": 1} for w in ("od", "res", "spot", "tpl", "aws")
        ],
    }
    gcp = "gcp:europe-west1/n2-standard-2"
    one = placement(
        [
            assignment("od", f"{gcp}/ondemand", 1, 0.1),
            assignment("res", f"{gcp}/reserved", 1, 0.1),
            assignment("spot", f"{gcp}/spot", 1, 0.03),
            assignment("tpl", f"{gcp}/ondemand", 1, 0.1),
            assignment("aws", "aws:eu-central-1/m6i.large/ondemand", 1, 0.1),
        ],
        request=request,
        id="pl_4",
    )
    targets = {s: [Target(s.split(":")[0], s, "shop")] for s in ("gcp:europe-west1", "aws:eu-central-1")}
    bundles = build_bundles(one, targets, templates={"tpl": template})
    pods = {
        m["metadata"]["labels"][f"{PREFIX}/workload"]: m["spec"]["template"]["spec"]
        for b in bundles
        for m in b.manifests
    }
    off_spot = [
        {"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"},
        {"key": "cloud.google.com/gke-preemptible", "operator": "DoesNotExist"},
    ]

    def terms(pod: dict) -> list:  # type: ignore[type-arg]
        return pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    assert terms(pods["od"]) == terms(pods["res"]) == [{"matchExpressions": off_spot}]
    assert terms(pods["tpl"]) == [{"matchExpressions": [zone, *off_spot]}]
    assert "affinity" not in pods["spot"] and "affinity" not in pods["aws"]
    check_bundles(bundles)  # strictly valid manifests
