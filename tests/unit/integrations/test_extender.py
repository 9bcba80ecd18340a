"""The scheduler extender's pure core: node -> pool, pod requests, filter and scores."""

from __future__ import annotations

from typing import Any

import pytest

from broker.core.domain import Site, SiteKind
from broker.dispatch.manifests import OWNED_PROVIDERS, node_placement, pool_parts, site_region
from broker.integrations import extender


def node(name: str, *, provider_id: str = "aws:///eu-central-1a/i-1", **labels: str) -> dict[str, Any]:
    site = labels.pop("placement-broker.dev/site", None)  # the one annotation a node may carry for the broker
    annotations = {"placement-broker.dev/site": site} if site else {}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": provider_id},
    }


def pod(cpu: str = "1", memory: str = "2Gi", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "api-1", "namespace": "shop", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
    }


@pytest.mark.parametrize(
    ("labels", "provider_id", "pool"),
    [
        (
            {"topology.kubernetes.io/region": "eu-central-1", "node.kubernetes.io/instance-type": "m6i.xlarge"},
            "aws:///eu-central-1a/i-1",
            "aws:eu-central-1/m6i.xlarge/ondemand",
        ),
        (
            {
                "topology.kubernetes.io/region": "eu-central-1",
                "node.kubernetes.io/instance-type": "m6i.xlarge",
                "karpenter.sh/capacity-type": "spot",
            },
            "aws:///eu-central-1a/i-1",
            "aws:eu-central-1/m6i.xlarge/spot",
        ),
        (
            {
                "topology.kubernetes.io/region": "us-east-1",
                "node.kubernetes.io/instance-type": "m5.large",
                "eks.amazonaws.com/capacityType": "SPOT",
            },
            "aws:///us-east-1a/i-2",
            "aws:us-east-1/m5.large/spot",
        ),
        (
            {
                "topology.kubernetes.io/region": "europe-west3",
                "node.kubernetes.io/instance-type": "n2-standard-4",
                "cloud.google.com/gke-spot": "true",
            },
            "gce://proj/europe-west3-a/gke-node-1",
            "gcp:europe-west3/n2-standard-4/spot",
        ),
        (
            {
                "topology.kubernetes.io/region": "westeurope",
                "node.kubernetes.io/instance-type": "Standard_D4s_v5",
                "kubernetes.azure.com/scalesetpriority": "spot",
            },
            "azure:///subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachineScaleSets/z/0",
            "azure:westeurope/Standard_D4s_v5/spot",
        ),
        (  # owned nodes: a private or edge site has reserved pools only, whatever Karpenter would say
            {"placement-broker.dev/site": "private:fra-dc1", "node.kubernetes.io/instance-type": "r740"},
            "",
            "private:fra-dc1/r740/reserved",
        ),
        (
            {
                "placement-broker.dev/site": "edge:munich-store-17",
                "node.kubernetes.io/instance-type": "nuc-i7",
                "karpenter.sh/capacity-type": "on-demand",
            },
            "",
            "edge:munich-store-17/nuc-i7/reserved",
        ),
        (  # the broker's own label, as dispatch labels a reserved pool's pods
            {
                "topology.kubernetes.io/region": "eu-central-1",
                "node.kubernetes.io/instance-type": "m6i.xlarge",
                "placement-broker.dev/capacity-type": "reserved-instance",
            },
            "aws:///eu-central-1a/i-1",
            "aws:eu-central-1/m6i.xlarge/reserved",
        ),
        (
            {
                "topology.kubernetes.io/region": "eu-central-1",
                "node.kubernetes.io/instance-type": "m6i.xlarge",
                "karpenter.sh/capacity-type": "on-demand",
            },
            "aws:///eu-central-1a/i-1",
            "aws:eu-central-1/m6i.xlarge/ondemand",
        ),
        ({"node.kubernetes.io/instance-type": "m6i.xlarge"}, "kind://docker/kind/kind-worker", None),
        ({"topology.kubernetes.io/region": "eu-central-1"}, "aws:///eu-central-1a/i-1", None),
    ],
)
def test_a_node_maps_to_its_pool_by_well_known_labels(
    labels: dict[str, str], provider_id: str, pool: str | None
) -> None:
    assert extender.node_pool(node("n", provider_id=provider_id, **labels)).pool == pool


def test_pod_requests_follow_kube_scheduler_sum_and_init_container_rule() -> None:
    p = pod("500m", "1Gi")
    p["spec"]["containers"].append({"name": "side", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "2", "memory": "256Mi"}}}]
    ask = extender.pod_ask(p)
    assert ask.cpu == pytest.approx(2.0)  # the init container's 2 cores exceed the containers' 0.75
    assert ask.memory_gib == pytest.approx(1.5)
    assert ask.name == "shop/api-1"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "must be a JSON object"),
        ({"Nodes": {"items": []}}, "Pod is missing"),
        ({"Pod": {}}, "needs Nodes or NodeNames"),
        ({"Pod": {}, "Nodes": {"items": "x"}}, "NodeList with an items array"),
        ({"Pod": {}, "NodeNames": [1, 2]}, "array of strings"),
    ],
)
def test_malformed_arguments_name_what_is_wrong(doc: Any, message: str) -> None:
    with pytest.raises(extender.ExtenderInputError, match=message):
        extender.read_args(doc)


def test_bad_quantity_and_unknown_policy_are_input_errors() -> None:
    with pytest.raises(extender.ExtenderInputError, match=r"requests\.cpu: 'lots'"):
        extender.pod_ask(pod(cpu="lots"))
    with pytest.raises(extender.ExtenderInputError, match="unknown policy"):
        extender.pod_ask(pod(**{"placement-broker.dev/residency": "nowhere"}))


def test_upstream_capitalised_and_older_lowercase_names_read_the_same() -> None:
    upper = extender.read_args({"Pod": pod(), "NodeNames": ["a", "b"]})
    lower = extender.read_args({"pod": pod(), "nodenames": ["a", "b"]})
    assert upper == lower
    assert upper[2] == ["a", "b"]


SITES = {
    "aws:eu-central-1": Site(
        "aws:eu-central-1", "aws", SiteKind.PUBLIC, "eu-central-1", "DE", ("EU", "EEA"), 50.1, 8.7
    ),
    "aws:us-east-1": Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0),
}


def test_residency_fails_nodes_outside_the_policy_unresolvably() -> None:
    ask = extender.pod_ask(pod(**{"placement-broker.dev/residency": "gdpr-eu"}))
    views = [
        extender.NodePool("fra", "aws:eu-central-1", "aws:eu-central-1/m6i.xlarge/ondemand"),
        extender.NodePool("iad", "aws:us-east-1", "aws:us-east-1/m6i.xlarge/ondemand"),
        extender.NodePool("unknown", None, None),
    ]
    result = extender.filter_nodes(ask, views, SITES)
    assert result.passed == ["fra", "unknown"]
    assert set(result.unresolvable) == {"iad"}
    assert "gdpr-eu" in result.unresolvable["iad"]


def test_without_a_policy_every_node_passes() -> None:
    views = [extender.NodePool("iad", "aws:us-east-1", "aws:us-east-1/m6i.xlarge/ondemand")]
    assert extender.filter_nodes(extender.pod_ask(pod()), views, SITES).passed == ["iad"]


PRICES = {
    "s/cheap/spot": (0.10, 4.0, 16.0),  # 4 replicas of 1 cpu / 2 GiB fit: 0.025 per replica
    "s/mid/ondemand": (0.20, 4.0, 16.0),  # 0.05
    "s/dear/ondemand": (0.40, 2.0, 4.0),  # 2 fit: 0.20
    "s/tiny/ondemand": (0.01, 0.5, 1.0),  # no replica fits: never preferred
}


def test_chosen_pool_scores_top_and_the_rest_by_replica_cost() -> None:
    ask = extender.pod_ask(pod(**{"placement-broker.dev/pool": "s/mid/ondemand"}))
    views = [
        extender.NodePool(n, "s", f"s/{n}") for n in ("cheap/spot", "mid/ondemand", "dear/ondemand", "tiny/ondemand")
    ]
    views.append(extender.NodePool("foreign", None, None))
    scores = dict(extender.prioritize(ask, views, PRICES.get))
    assert scores["mid/ondemand"] == extender.MAX_PRIORITY
    assert scores["cheap/spot"] == extender.MAX_PRIORITY - 1
    assert scores["dear/ondemand"] == 1
    assert scores["tiny/ondemand"] == 0
    assert scores["foreign"] == 0
    assert all(0 <= s <= extender.MAX_PRIORITY for s in scores.values())


def test_scores_order_strictly_by_cost_between_the_extremes() -> None:
    ask = extender.pod_ask(pod())
    views = [extender.NodePool(n, "s", f"s/{n}") for n in ("cheap/spot", "mid/ondemand", "dear/ondemand")]
    scores = dict(extender.prioritize(ask, views, PRICES.get))
    assert scores["cheap/spot"] > scores["mid/ondemand"] > scores["dear/ondemand"]


@pytest.mark.parametrize(
    ("pool", "provider_id"),
    [
        ("aws:eu-central-1/m6i.xlarge/ondemand", "aws:///eu-central-1a/i-1"),
        ("aws:eu-central-1/m6i.xlarge/spot", "aws:///eu-central-1a/i-1"),
        ("aws:eu-central-1/m6i.xlarge/reserved", "aws:///eu-central-1a/i-1"),  # on-demand nodes to Kubernetes
        ("aws:us-east-1-bos-1/m5.large/ondemand", "aws:///us-east-1-bos-1a/i-2"),  # a Local Zone's parent region
        ("gcp:europe-west3/n2-standard-4/ondemand", "gce://proj/europe-west3-a/gke-node-1"),
        ("gcp:europe-west3/n2-standard-4/spot", "gce://proj/europe-west3-a/gke-node-1"),
        ("gcp:europe-west3/n2-standard-4/reserved", "gce://proj/europe-west3-a/gke-node-1"),
        ("azure:westeurope/Standard_D4s_v5/spot", "azure:///subscriptions/x/virtualMachineScaleSets/z/0"),
        ("azure:westeurope/Standard_D4s_v5/reserved", "azure:///subscriptions/x/virtualMachineScaleSets/z/0"),
        ("private:fra-dc1/r740-std/reserved", ""),
        ("edge:munich-store-17/nuc-i7/reserved", ""),
    ],
)
def test_the_chosen_pool_scores_top_on_the_nodes_dispatch_selects_for_it(pool: str, provider_id: str) -> None:
    site, instance_type, capacity = pool_parts(pool)
    provider = site.partition(":")[0]
    selector, _ = node_placement(provider, instance_type, capacity, "amd64", region=site_region(site))
    owned = {"placement-broker.dev/site": site} if provider in OWNED_PROVIDERS else {}
    selected = node("selected", provider_id=provider_id, **selector, **owned)
    other_type = node("other", provider_id=provider_id, **{**selector, **owned, **{_TYPE: "other.type"}})
    ask = extender.pod_ask(pod(**{extender.POOL_ANNOTATION: pool}))
    scores = dict(extender.prioritize(ask, [extender.node_pool(selected), extender.node_pool(other_type)], _same_price))
    assert scores == {"selected": extender.MAX_PRIORITY, "other": extender.MAX_PRIORITY - 1}


def test_a_reserved_or_on_demand_choice_does_not_score_top_on_spot_nodes() -> None:
    fra = {"topology.kubernetes.io/region": "eu-central-1", _TYPE: "m6i.xlarge"}
    spot = extender.node_pool(node("spot", **fra, **{"karpenter.sh/capacity-type": "spot"}))
    for chosen in ("aws:eu-central-1/m6i.xlarge/reserved", "aws:eu-central-1/m6i.xlarge/ondemand"):
        ask = extender.pod_ask(pod(**{extender.POOL_ANNOTATION: chosen}))
        assert extender.prioritize(ask, [spot], _same_price) == [("spot", extender.MAX_PRIORITY - 1)]


def test_a_pool_annotation_that_is_no_pool_id_matches_no_node() -> None:
    fra = extender.node_pool(node("fra", **{"topology.kubernetes.io/region": "eu-central-1", _TYPE: "m6i.xlarge"}))
    ask = extender.pod_ask(pod(**{extender.POOL_ANNOTATION: "m6i.xlarge"}))
    assert extender.prioritize(ask, [fra], _same_price) == [("fra", extender.MAX_PRIORITY - 1)]


_TYPE = "node.kubernetes.io/instance-type"


def _same_price(pool: str) -> tuple[float, float, float]:  # every pool priced alike: only the chosen one stands out
    return (0.2, 4.0, 16.0)
