"""Karpenter NodeOverlays from discount rules and commitments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from broker.integrations import karpenter
from pricing.discounts import DiscountRule, discount_pct
from tests.unit.integrations.nodeoverlay_schema import NODE_OVERLAY

TYPES = {
    "eu-central-1": {"m6i.large", "m6i.xlarge", "c7g.large"},
    "eu-west-1": {"m6i.large"},
    "us-east-1": {"m6i.large", "r7i.large"},
}


def test_a_rule_selects_its_types_regions_and_capacity_types() -> None:
    rule = DiscountRule("aws", 12.5, "m6i.*", "eu-*", frozenset({"ondemand"}))
    (overlay,), skipped = karpenter.discount_overlays([(3, rule)], TYPES)
    assert skipped == []
    jsonschema.validate(overlay, NODE_OVERLAY)
    req = {r["key"]: r["values"] for r in overlay["spec"]["requirements"]}
    assert req == {
        "karpenter.sh/capacity-type": ["on-demand"],
        "node.kubernetes.io/instance-type": ["m6i.large", "m6i.xlarge"],
        "topology.kubernetes.io/region": ["eu-central-1", "eu-west-1"],
    }
    assert overlay["spec"]["priceAdjustment"] == "-12.5%"
    assert overlay["metadata"]["name"] == "pb-aws-discount-3"


def test_wildcards_add_no_requirement_and_all_capacity_types_apply() -> None:
    (overlay,), _ = karpenter.discount_overlays([(1, DiscountRule("aws", 7, "*", "*"))], TYPES)
    jsonschema.validate(overlay, NODE_OVERLAY)
    assert overlay["spec"]["requirements"] == [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]}
    ]


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        (DiscountRule("aws", 10, "x9.*"), "matches no aws instance type"),
        (DiscountRule("aws", 10, "*", "*", frozenset({"reserved"})), "reserved pools only"),
        (DiscountRule("aws", 0, "*"), "changes no price"),
    ],
)
def test_rules_that_cannot_become_an_overlay_say_why(rule: DiscountRule, why: str) -> None:
    overlays, skipped = karpenter.discount_overlays([(9, rule)], TYPES)
    assert overlays == []
    assert why in skipped[0]


def test_heaviest_overlay_is_the_largest_discount_as_in_the_broker() -> None:
    rules = [DiscountRule("aws", 5, "*"), DiscountRule("aws", 30, "m6i.*"), DiscountRule("aws", 12.25, "*", "eu-*")]
    overlays, _ = karpenter.discount_overlays(list(enumerate(rules)), TYPES)
    for region, types in TYPES.items():
        for itype in types:
            matching = [
                (o["spec"]["weight"], o["spec"]["priceAdjustment"])
                for o, r in zip(overlays, rules, strict=True)
                if r.matches("aws", region, itype, "ondemand")
            ]
            karpenter_pick = max(matching)[1]
            assert karpenter_pick == f"-{discount_pct(rules, 'aws', region, itype, 'ondemand'):g}%"


def test_adjustments_stay_inside_the_crd_pattern() -> None:
    for pct in (0.01, 1, 12.3456, 99.99, 100, 150):
        (overlay,), _ = karpenter.discount_overlays([(1, DiscountRule("aws", pct, "*"))], TYPES)
        jsonschema.validate(overlay, NODE_OVERLAY)


def test_commitments_price_their_type_and_region_above_every_discount() -> None:
    (overlay,) = karpenter.commitment_overlays("aws", [karpenter.Commitment("eu-central-1", "m6i.xlarge", 0.0, 10)])
    jsonschema.validate(overlay, NODE_OVERLAY)
    assert overlay["spec"]["price"] == "0.000000"
    assert overlay["spec"]["weight"] == karpenter.MAX_WEIGHT
    assert "10 committed m6i.xlarge" in overlay["metadata"]["annotations"]["placement-broker.dev/source"]


# ---- against Karpenter's own CRD and its node labels ------------------------------------------

UPSTREAM_CRD = Path(__file__).resolve().parents[2] / "integration" / "crds" / "karpenter-nodeoverlays.yaml"


def upstream_schema() -> dict[str, Any]:
    (crd,) = yaml.safe_load_all(UPSTREAM_CRD.read_text())
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and f"{crd['spec']['group']}/v1alpha1" == karpenter.API_VERSION
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def selects(overlay: dict[str, Any], node: dict[str, str]) -> bool:
    """Whether the overlay's requirements select a node with these labels (In: the label's value is
    one of the values, as Karpenter's scheduling.Requirements compare an offering's labels)."""
    return all(r["operator"] == "In" and node.get(r["key"]) in r["values"] for r in overlay["spec"]["requirements"])


def node(region: str, zone: str, instance_type: str = "m6i.xlarge", capacity: str = "on-demand") -> dict[str, str]:
    """The labels Karpenter's AWS provider gives a node: the region, and the EC2 zone name of the
    subnet it launched in (pkg/providers/instancetype/types.go, offering/base_resolver.go)."""
    return {
        "topology.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone,
        "node.kubernetes.io/instance-type": instance_type,
        "karpenter.sh/capacity-type": capacity,
    }


@pytest.mark.parametrize(
    ("site", "inside", "outside"),
    [
        ("us-east-1-bos-1", node("us-east-1", "us-east-1-bos-1a"), node("us-east-1", "us-east-1a")),
        ("us-west-2-lax-1", node("us-west-2", "us-west-2-lax-1b"), node("us-west-2", "us-west-2a")),
        ("us-west-2-wl1-las1", node("us-west-2", "us-west-2-wl1-las-wlz-1"), node("us-west-2", "us-west-2-las-1a")),
        ("us-east-1", node("us-east-1", "us-east-1a"), node("us-east-2", "us-east-2a")),
    ],
)
def test_a_commitment_prices_its_sites_nodes_and_no_others(
    site: str, inside: dict[str, str], outside: dict[str, str]
) -> None:
    """A Local Zone's nodes are labelled with the parent region (never the zone group, the old
    overlay's region value, which selected nothing) and the zone: the committed price reaches
    the zone's nodes and not the rest of the region."""
    (overlay,) = karpenter.commitment_overlays("aws", [karpenter.Commitment(site, "m6i.xlarge", 0.1, 3)])
    jsonschema.validate(overlay, NODE_OVERLAY)
    jsonschema.Draft202012Validator(upstream_schema()).validate(overlay)
    assert selects(overlay, inside)
    assert not selects(overlay, outside)
    assert not selects(overlay, {**inside, "node.kubernetes.io/instance-type": "m6i.large"})
    assert not selects(overlay, {**inside, "karpenter.sh/capacity-type": "spot"})


def test_a_local_zone_commitment_names_the_parent_region_and_the_zones() -> None:
    (overlay,) = karpenter.commitment_overlays("aws", [karpenter.Commitment("us-east-1-bos-1", "m6i.xlarge", 0.1, 3)])
    req = {r["key"]: r["values"] for r in overlay["spec"]["requirements"]}
    assert req["topology.kubernetes.io/region"] == ["us-east-1"]
    assert "us-east-1-bos-1a" in req["topology.kubernetes.io/zone"]
    assert all(z.startswith("us-east-1-bos-1") and len(z) == len("us-east-1-bos-1a") for z in req[karpenter.ZONE_LABEL])


def test_an_azure_commitment_selects_its_region() -> None:
    (overlay,) = karpenter.commitment_overlays("azure", [karpenter.Commitment("westeurope", "Standard_D4s_v5", 0.2, 1)])
    req = {r["key"]: r["values"] for r in overlay["spec"]["requirements"]}
    assert req["topology.kubernetes.io/region"] == ["westeurope"] and karpenter.ZONE_LABEL not in req


def test_every_overlay_kind_is_valid_against_the_upstream_crd_schema() -> None:
    validator = jsonschema.Draft202012Validator(upstream_schema())
    rules = [DiscountRule("aws", 12.5, "m6i.*", "eu-*", frozenset({"ondemand"})), DiscountRule("aws", 100, "*")]
    overlays, _ = karpenter.discount_overlays(list(enumerate(rules)), TYPES)
    overlays += karpenter.commitment_overlays("aws", [karpenter.Commitment("eu-central-1-ham-1", "c6i.large", 0, 1)])
    assert len(overlays) == 3
    for overlay in overlays:
        validator.validate(overlay)
        for r in overlay["spec"]["requirements"]:  # the CRD's bounds its CEL rules and patterns state
            assert len(r["key"]) <= 316 and all(len(v) <= 63 for v in r["values"])
