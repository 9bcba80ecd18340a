"""Karpenter NodeOverlay objects (karpenter.sh/v1alpha1) from the broker's negotiated discounts and
committed capacity, so Karpenter's own instance choices see the prices the broker plans with.

* A discount rule becomes an overlay with `priceAdjustment: "-<pct>%"` whose requirements select what
  the rule matches: its instance types (the rule's glob expanded over the catalog, because node
  requirements have no globs), its regions, its capacity types. Rules do not stack in the broker (the
  largest matching discount wins); Karpenter applies the overlay of highest `weight`, so the weight
  grows with the discount and the same rule wins in both.
* Committed capacity (reserved instances and nodes already bought, `broker pricing commit`) becomes an
  overlay with a fixed `price` for on-demand nodes of that type in that region, above every discount.
  At an AWS Local or Wavelength Zone site the overlay selects the parent region (the only value
  Karpenter gives `topology.kubernetes.io/region` there) and the zone group's zones by name
  (`topology.kubernetes.io/zone`, the EC2 zone name Karpenter labels nodes with), so the committed
  price reaches the zone's nodes and no others of the region.
  A NodeOverlay cannot cap how many nodes get the price, so Karpenter would price every such node at
  the committed rate: these overlays are only built when asked for (docs/kubernetes.md says when
  that is right).

Pure: the caller passes the rules, the commitments and which instance types each region sells.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from broker.dispatch.manifests import site_region
from pricing.discounts import DiscountRule

API_VERSION = "karpenter.sh/v1alpha1"
MANAGED_BY = "placement-broker"
MAX_REQUIREMENTS = 100  # the CRD's limit on requirements
MAX_WEIGHT = 10_000
# Karpenter's capacity types; a broker "reserved" pool is a billing construct on on-demand capacity
_CAPACITY = {"ondemand": "on-demand", "spot": "spot"}
KARPENTER_PROVIDERS = ("aws", "azure")  # clouds Karpenter has a provider for
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
# The catalog names an AWS edge site by its zone group; EC2 names the zones in it:
# a Local Zone group us-west-2-lax-1 holds us-west-2-lax-1a and us-west-2-lax-1b (a letter per
# zone; which letters exist is not in the catalog, and a name no zone has matches nothing), and
# the catalog's Wavelength code us-east-1-wl1-bos1 is the zone us-east-1-wl1-bos-wlz-1.
LOCAL_ZONE_LETTERS = "abcd"
_WAVELENGTH = re.compile(r"^(?P<group>.+-wl\d+)-(?P<metro>[a-z]+)(?P<n>\d+)$")


@dataclass(frozen=True, slots=True)
class Commitment:
    region: str
    instance_type: str
    usd_per_hour: float
    count: int


def _name(text: str) -> str:
    """A DNS-1123 subdomain name for the overlay."""
    name = re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")
    return name[:253].rstrip("-.")


def _adjustment(pct: float) -> str:
    # the CRD admits -0.xx% .. -99.xx% and exactly -100%
    return "-100%" if pct >= 100 else f"-{pct:.4f}".rstrip("0").rstrip(".") + "%"


def _overlay(name: str, spec: dict[str, Any], note: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "NodeOverlay",
        "metadata": {
            "name": _name(name),
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            "annotations": {"placement-broker.dev/source": note},
        },
        "spec": spec,
    }


def discount_overlays(
    rules: Iterable[tuple[int, DiscountRule]], types_by_region: Mapping[str, Iterable[str]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """One overlay per discount rule that matches something; (overlays, why other rules were skipped)."""
    out: list[dict[str, Any]] = []
    skipped: list[str] = []
    for rule_id, rule in rules:
        regions = sorted(r for r in types_by_region if fnmatchcase(r, rule.region))
        types = sorted({t for r in regions for t in types_by_region[r] if fnmatchcase(t, rule.family)})
        capacities = sorted({_CAPACITY[c] for c in (rule.capacity_types or _CAPACITY) if c in _CAPACITY})
        if not regions or not types:
            skipped.append(f"discount {rule_id}: matches no {rule.provider} instance type in the catalog")
            continue
        if not capacities:
            skipped.append(f"discount {rule_id}: applies to reserved pools only, which Karpenter does not launch")
            continue
        if rule.discount_pct <= 0:
            skipped.append(f"discount {rule_id}: {rule.discount_pct}% changes no price")
            continue
        requirements: list[dict[str, Any]] = [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacities}
        ]
        if rule.family != "*":
            requirements.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types})
        if rule.region != "*":
            requirements.append({"key": REGION_LABEL, "operator": "In", "values": regions})
        spec = {
            "requirements": requirements,
            "priceAdjustment": _adjustment(rule.discount_pct),
            # the broker applies the largest matching discount; Karpenter the heaviest overlay
            "weight": max(1, min(MAX_WEIGHT - 1, round(rule.discount_pct * 10))),
        }
        note = f"discount rule {rule_id}: {rule.discount_pct:g}% on {rule.provider} {rule.family} in {rule.region}"
        out.append(_overlay(f"pb-{rule.provider}-discount-{rule_id}", spec, note))
    return out, skipped


def aws_zone_names(zone_group: str) -> list[str]:
    """The EC2 zone names (Karpenter's `topology.kubernetes.io/zone` values) of the catalog's AWS
    Local or Wavelength Zone site `zone_group`."""
    wavelength = _WAVELENGTH.match(zone_group)
    if wavelength:
        return [f"{wavelength['group']}-{wavelength['metro']}-wlz-{wavelength['n']}"]
    return [f"{zone_group}{letter}" for letter in LOCAL_ZONE_LETTERS]


def location_requirements(provider: str, region: str) -> list[dict[str, Any]]:
    """What selects the nodes of the catalog's `provider` site `region`: its region label, and at
    an AWS Local or Wavelength Zone the parent region with the zone group's zones."""
    parent = site_region(f"{provider}:{region}") or region
    requirements: list[dict[str, Any]] = [{"key": REGION_LABEL, "operator": "In", "values": [parent]}]
    if provider == "aws" and parent != region:
        requirements.append({"key": ZONE_LABEL, "operator": "In", "values": aws_zone_names(region)})
    return requirements


def commitment_overlays(provider: str, commitments: Iterable[Commitment]) -> list[dict[str, Any]]:
    out = []
    for c in sorted(commitments, key=lambda c: (c.region, c.instance_type)):
        spec = {
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [c.instance_type]},
                *location_requirements(provider, c.region),
            ],
            "price": f"{c.usd_per_hour:.6f}",
            "weight": MAX_WEIGHT,  # bought capacity beats every discount
        }
        note = f"{c.count} committed {c.instance_type} nodes in {provider}:{c.region} at {c.usd_per_hour:g} USD/h"
        out.append(_overlay(f"pb-{provider}-commit-{c.region}-{c.instance_type}", spec, note))
    return out
