"""Karmada PropagationPolicies that divide replicas as the broker placed them."""

from __future__ import annotations

import pytest

from broker.integrations import karmada
from tests.placements import assignment

ASSIGN = [
    assignment("api", "aws:eu-central-1/m6i.large/ondemand", 4),
    assignment("api", "azure:westeurope/Standard_D2s_v5/ondemand", 2),
    assignment("api", "aws:eu-central-1/m6i.xlarge/spot", 1),
    assignment("db", "azure:westeurope/Standard_D4s_v5/ondemand", 3),
]


def test_weights_are_the_replicas_per_member_cluster() -> None:
    weights = karmada.cluster_weights(ASSIGN, {"aws:eu-central-1": ["fra"], "azure:westeurope": ["ams-a", "ams-b"]})
    assert weights == {"api": {"ams-a": 1, "ams-b": 1, "fra": 5}, "db": {"ams-a": 2, "ams-b": 1}}
    assert sum(weights["api"].values()) == 7  # every replica the broker placed, no more


def test_a_site_without_a_member_cluster_is_named() -> None:
    with pytest.raises(karmada.UnservedSites, match="azure:westeurope"):
        karmada.cluster_weights(ASSIGN, {"aws:eu-central-1": ["fra"]})


def test_one_policy_per_workload_selecting_its_deployment() -> None:
    clusters = {"aws:eu-central-1": ["fra"], "azure:westeurope": ["ams"]}
    api, db = karmada.propagation_policies("pl_1", ASSIGN, clusters, namespace="shop")
    assert api["apiVersion"] == "policy.karmada.io/v1alpha1" and api["kind"] == "PropagationPolicy"
    assert api["spec"]["resourceSelectors"] == [
        {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "api"}
    ]
    placement = api["spec"]["placement"]
    assert placement["clusterAffinity"]["clusterNames"] == ["ams", "fra"]
    scheduling = placement["replicaScheduling"]
    assert scheduling["replicaSchedulingType"] == "Divided"
    assert scheduling["replicaDivisionPreference"] == "Weighted"
    assert scheduling["weightPreference"]["staticWeightList"] == [
        {"targetCluster": {"clusterNames": ["ams"]}, "weight": 2},
        {"targetCluster": {"clusterNames": ["fra"]}, "weight": 5},
    ]
    assert db["metadata"]["annotations"]["placement-broker.dev/placement-id"] == "pl_1"
