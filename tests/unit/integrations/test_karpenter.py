"""Karpenter NodeOverlays from discount rules and commitments."""

from __future__ import annotations

import jsonschema
import pytest

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
