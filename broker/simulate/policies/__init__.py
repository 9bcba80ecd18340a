"""The policies a simulation compares; `register` adds your own (docs/simulate.md)."""

from __future__ import annotations

from broker.simulate.policies.base import Policy, PolicyFactory, SimContext, StepView
from broker.simulate.policies.broker import BrokerPolicy
from broker.simulate.policies.cheapest import CheapestFit
from broker.simulate.policies.karpenter import KarpenterLike
from broker.simulate.policies.kube import KubeDefault

POLICIES: dict[str, PolicyFactory] = {
    "kube-default": KubeDefault,
    "cheapest-fit": CheapestFit,
    "karpenter-like": KarpenterLike,
    "broker": BrokerPolicy,
}


def register(name: str, factory: PolicyFactory) -> None:
    """Make a policy available to `broker simulate --policies` and the API by name."""
    POLICIES[name] = factory


__all__ = ["POLICIES", "Policy", "PolicyFactory", "SimContext", "StepView", "register"]
