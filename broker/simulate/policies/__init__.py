"""The policies a simulation compares; `register` adds your own (docs/simulate.md)."""

from __future__ import annotations

from broker.simulate.fleet import FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.base import Policy, PolicyFactory, SimContext, StepView
from broker.simulate.policies.broker import BrokerPolicy
from broker.simulate.policies.cheapest import CheapestFit
from broker.simulate.policies.karpenter import KarpenterLike
from broker.simulate.policies.kube import KubeDefault


def _ppo(fleet: FleetIn, market: Market) -> Policy:
    # imported when asked for: the learned policy's module imports this package's base
    from broker.simulate.rl.policy import PPOPolicy

    return PPOPolicy(fleet, market)


def _broker_ppo(fleet: FleetIn, market: Market) -> Policy:
    from broker.simulate.rl.policy import BrokerPlusPPO

    return BrokerPlusPPO(fleet, market)


POLICIES: dict[str, PolicyFactory] = {
    "kube-default": KubeDefault,
    "cheapest-fit": CheapestFit,
    "karpenter-like": KarpenterLike,
    "broker": BrokerPolicy,
    "ppo": _ppo,  # the learned scheduler (broker/simulate/rl/), the newest shipped policy file
    "broker+ppo": _broker_ppo,
}


def register(name: str, factory: PolicyFactory) -> None:
    """Make a policy available to `broker simulate --policies` and the API by name."""
    POLICIES[name] = factory


__all__ = ["POLICIES", "Policy", "PolicyFactory", "SimContext", "StepView", "register"]
