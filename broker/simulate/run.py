"""Run several policies over one fleet: the same market, usage and scenario for each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from broker.core.allocatable import NodeOverhead
from broker.errors import InvalidRequest
from broker.simulate.engine import RunResult, simulate
from broker.simulate.events import build_scenario
from broker.simulate.fleet import FleetIn, at_least_one_step
from broker.simulate.market import CatalogParts, Market, build_market
from broker.simulate.policies import POLICIES, Policy
from broker.simulate.usage import Usage, build_usage
from broker.solver import SolverOptions

Progress = Callable[[str, int, int], None]  # (policy, steps done, steps in all)


@dataclass
class Simulation:
    fleet: FleetIn
    days: float
    runs: list[RunResult]

    @property
    def warnings(self) -> list[str]:
        """What makes the figures doubtful, every policy's (each names its policy)."""
        return [w for run in self.runs for w in run.warnings]


def check_policies(names: Sequence[str]) -> list[str]:
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        known = ", ".join(sorted(POLICIES))
        raise InvalidRequest(
            f"unknown policy {unknown[0]!r}; known: {known}",
            errors=[
                {"loc": ["policies", i], "msg": f"unknown policy {n!r}; known: {known}"}
                for i, n in enumerate(names)
                if n in unknown
            ],
        )
    if not names:
        raise InvalidRequest("no policy to simulate", errors=[{"loc": ["policies"], "msg": "at least one policy"}])
    return list(dict.fromkeys(names))


def check_days(days: float) -> list[dict[str, Any]]:
    """A run's length as field errors (`loc: ["days"]`): one 5-minute step at least."""
    try:
        at_least_one_step(days)
    except ValueError as exc:
        return [{"loc": ["days"], "msg": str(exc)}]
    return []


@dataclass
class Prepared:
    market: Market
    usage: Usage
    policies: list[tuple[str, Policy]]


def prepare(
    fleet: FleetIn,
    parts: CatalogParts,
    traces: pd.DataFrame,
    *,
    policies: Sequence[str],
    days: float,
    overhead: NodeOverhead | None = None,
) -> Prepared:
    """Everything a run of these (known) policies would refuse, refused at once: one
    InvalidRequest naming every offending field (length, sites, series, each policy's
    configuration), locations relative to the fleet."""
    too_short = check_days(days)
    errors = list(too_short)
    market = usage = None
    try:
        market = build_market(fleet, parts, overhead)
    except InvalidRequest as exc:
        errors += exc.errors or [{"loc": [], "msg": exc.detail}]
    if not too_short:
        try:
            usage = build_usage(fleet, traces, days=days)
        except InvalidRequest as exc:
            errors += exc.errors or [{"loc": [], "msg": exc.detail}]
    made: list[tuple[str, Policy]] = []
    for name in policies:
        if market is None:  # a policy's configuration is checked against the market
            break
        try:
            made.append((name, POLICIES[name](fleet, market)))
        except InvalidRequest as exc:
            errors += exc.errors or [{"loc": [], "msg": exc.detail}]
    if errors or market is None or usage is None:
        raise InvalidRequest(invalid_summary(errors), errors=errors)
    return Prepared(market, usage, made)


def invalid_summary(errors: Sequence[dict[str, Any]]) -> str:
    """The detail of an InvalidRequest with several errors: the first, and how many more."""
    if not errors:
        return "invalid simulation"
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{'.'.join(str(p) for p in first.get('loc', []))}: {first.get('msg')}{more}"


def run_simulation(
    fleet: FleetIn,
    parts: CatalogParts,
    traces: pd.DataFrame,
    *,
    policies: Sequence[str],
    days: float | None = None,
    seed: int | None = None,
    progress: Progress | None = None,
    solver_options: SolverOptions | None = None,
    overhead: NodeOverhead | None = None,
) -> Simulation:
    """Validate everything first (policies, sites, series, length, each policy's configuration),
    then replay each policy. `overhead`: per node, what DaemonSets request (the settings'
    node_overhead), as the solver of the product leaves it out of every node's allocatable capacity."""
    errors: list[dict[str, Any]] = []
    try:
        names = check_policies(policies)
    except InvalidRequest as exc:
        errors += exc.errors
        names = [n for n in dict.fromkeys(policies) if n in POLICIES]
    if seed is not None:
        fleet = fleet.model_copy(update={"seed": seed})
    length = fleet.days if days is None else days
    try:
        ready = prepare(fleet, parts, traces, policies=names, days=length, overhead=overhead)
    except InvalidRequest as exc:
        errors += exc.errors
    if errors:
        raise InvalidRequest(invalid_summary(errors), errors=errors)
    scenario = build_scenario(fleet, ready.market, days=length)
    runs = []
    for name, policy in ready.policies:
        tick = (lambda done, total, _n=name: progress(_n, done, total)) if progress else None
        runs.append(
            simulate(fleet, ready.market, ready.usage, scenario, policy, progress=tick, solver_options=solver_options)
        )
    return Simulation(fleet=fleet, days=length, runs=runs)
