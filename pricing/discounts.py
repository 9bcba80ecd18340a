"""Negotiated discounts (EDP, MACC, CUD-style private pricing): rules matched on list prices.

Pure. A rule names a provider and optionally globs on the instance type (``family``, e.g.
``m6i.*`` or ``Standard_D*``) and the region (e.g. ``eu-*``), and the capacity types it
covers (empty = all). Rules do not stack: a price gets the largest discount of the rules
that match it, as enterprise agreements state one rate per scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True, slots=True)
class DiscountRule:
    provider: str
    discount_pct: float
    family: str = "*"
    region: str = "*"
    capacity_types: frozenset[str] = frozenset()

    def matches(self, provider: str, region: str, instance_type: str, capacity_type: str) -> bool:
        return (
            self.provider == provider
            and fnmatchcase(region, self.region)
            and fnmatchcase(instance_type, self.family)
            and (not self.capacity_types or capacity_type in self.capacity_types)
        )


def discount_pct(
    rules: Iterable[DiscountRule], provider: str, region: str, instance_type: str, capacity_type: str
) -> float:
    return max(
        (r.discount_pct for r in rules if r.matches(provider, region, instance_type, capacity_type)),
        default=0.0,
    )


def effective_price(
    list_price: float,
    rules: Iterable[DiscountRule],
    *,
    provider: str,
    region: str,
    instance_type: str,
    capacity_type: str,
) -> float:
    pct = discount_pct(rules, provider, region, instance_type, capacity_type)
    return round(list_price * (1.0 - pct / 100.0), 6)
