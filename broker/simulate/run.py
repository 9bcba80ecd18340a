"""Run several policies over one fleet: the same market, usage and scenario for each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from broker.core.allocatable import NodeOverhead
from broker.errors import InvalidRequest
from broker.simulate.engine import RunResult, simulate
from broker.simulate.events import build_scenario
from broker.simulate.fleet import FleetIn
from broker.simulate.market import CatalogParts, build_market
from broker.simulate.policies import POLICIES
from broker.simulate.usage import build_usage
from broker.solver import SolverOptions

Progress = Callable[[str, int, int], None]  # (policy, steps done, steps in all)


@dataclass
class Simulation:
    fleet: FleetIn
    days: float
    runs: list[RunResult]


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
    """Validate everything first (policies, sites, series, length), then replay each policy.
    `overhead`: per node, what DaemonSets request (the settings' node_overhead), as the solver
    of the product leaves it out of every node's allocatable capacity."""
    names = check_policies(policies)
    if seed is not None:
        fleet = fleet.model_copy(update={"seed": seed})
    length = fleet.days if days is None else days
    if length <= 0:
        raise InvalidRequest("days must be positive", errors=[{"loc": ["days"], "msg": "must be positive"}])
    market = build_market(fleet, parts, overhead)
    usage = build_usage(fleet, traces, days=length)
    scenario = build_scenario(fleet, market, days=length)
    made = [(n, POLICIES[n](fleet, market)) for n in names]  # configuration errors before any replay
    runs = []
    for name, policy in made:
        tick = (lambda done, total, _n=name: progress(_n, done, total)) if progress else None
        runs.append(simulate(fleet, market, usage, scenario, policy, progress=tick, solver_options=solver_options))
    return Simulation(fleet=fleet, days=length, runs=runs)
