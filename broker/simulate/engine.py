"""Replay one policy over the scenario, step by step. Pure: no clock but the timers (each decision's,
and the run's own wall and CPU time, which no figure of the replay depends on), no I/O.

Each step: nodes that finished starting become ready; the scenario's events happen (prices,
failures, demand, spot reclaims); the policy decides; the step is charged and scored. Before
the first step the policy places the fleet once with nodes already running (the fleet exists
when the replay starts), and that opening placement is not scored as scheduling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from broker.core.pooltable import IntArray
from broker.simulate.accounting import Dependencies, Ledger, account
from broker.simulate.cluster import Cluster
from broker.simulate.events import Event, Scenario
from broker.simulate.fleet import STEP_S, FleetIn
from broker.simulate.market import SPOT, Market
from broker.simulate.policies.base import Policy, SimContext, StepView
from broker.simulate.usage import Usage
from broker.solver import SolverOptions

Progress = Callable[[int, int], None]  # (steps done, steps in all)


@dataclass
class RunResult:
    policy: str
    ledger: Ledger
    events: list[Event]
    sched_latency_s: list[float]
    decision_s: list[float]  # wall time of each decision that had replicas waiting
    spot_interruptions: int = 0
    replicas_interrupted: int = 0
    migrations: int = 0
    migration_cost: float = 0.0
    tenants: list[str] = field(default_factory=list)
    tenant_weights: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the policy's: what makes its figures doubtful
    wall_s: float = 0.0  # the replay's own time, training the policy included (bench/simulate.py)
    cpu_s: float = 0.0


def simulate(
    fleet: FleetIn,
    market: Market,
    usage: Usage,
    scenario: Scenario,
    policy: Policy,
    *,
    progress: Progress | None = None,
    solver_options: SolverOptions | None = None,
) -> RunResult:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    replay = Replay(fleet, market, usage, scenario, policy.name, solver_options=solver_options)
    policy.start(replay.ctx)
    if progress is not None:  # the policy starts now: its opening placement can be its longest step
        progress(0, scenario.steps)
    policy.decide(replay.c, replay.opening())
    replay.opened()
    for step in range(scenario.steps):
        view = replay.begin(step)
        waiting = len(replay.c.pending()) > 0
        started = time.perf_counter()
        policy.decide(replay.c, view)
        if waiting:
            replay.out.decision_s.append(time.perf_counter() - started)
        replay.end(step)
        if progress is not None:
            progress(step + 1, scenario.steps)
    out = replay.finish(getattr(policy, "warnings", ()))
    out.wall_s, out.cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    return out


class Replay:
    """One replay's state, advanced a step at a time by whoever decides: `simulate` with a
    policy, the RL environment (broker/simulate/rl/env.py) one pending replica at a time.

    opening() -> decide -> opened(); then per step: begin(step) -> decide -> end(step); finish().
    """

    def __init__(
        self,
        fleet: FleetIn,
        market: Market,
        usage: Usage,
        scenario: Scenario,
        name: str,
        *,
        solver_options: SolverOptions | None = None,
    ) -> None:
        usage = _with_surge(usage, scenario)
        self.fleet, self.usage, self.scenario = fleet, usage, scenario
        self.ctx = SimContext(fleet=fleet, market=market, usage=usage, scenario=scenario, solver_options=solver_options)
        self.c = Cluster(market, len(fleet.workloads))
        self.base = np.array([w.replicas for w in fleet.workloads], dtype=np.int64)
        tenants = [t.name for t in fleet.tenants]
        self.tenant_of = np.array([tenants.index(w.tenant) for w in fleet.workloads], dtype=np.int64)
        self.deps = _dependencies(fleet)
        self.ledger = Ledger(scenario.steps, len(tenants))
        self.timeline = scenario.timeline(market)
        self.scheduled: dict[int, list[Event]] = {}
        for e in self.timeline:
            self.scheduled.setdefault(e.step, []).append(e)
        self.out = RunResult(
            policy=name,
            ledger=self.ledger,
            events=[],
            sched_latency_s=[],
            decision_s=[],
            tenants=tenants,
            tenant_weights=[t.weight for t in fleet.tenants],
        )

    def opening(self) -> StepView:
        """The opening placement's view: the fleet is running when the replay starts, so nodes
        launched now are ready at once."""
        self.c.instant = True
        for k, n in enumerate(self.base.tolist()):
            self.c.add_replicas(k, n)
        return _view(self.ctx, self.c, 0, (), self.base)

    def opened(self) -> None:
        """The opening placement is not scored as scheduling."""
        self.c.instant = False
        self.c.sched_latency_s.clear()
        self.c.migrations = 0

    def begin(self, step: int) -> StepView:
        """Time moves to `step`: nodes get ready, the scenario's events happen; what a policy sees."""
        c = self.c
        c.step = step
        c.now_s = step * STEP_S
        c.ready_until(c.now_s)
        events = list(self.scheduled.get(step, []))
        target = _target_replicas(self.base, self.scenario, step)
        events += _apply(c, self.scenario, step, target, self.out)
        self.out.events.extend(e for e in events if e.kind == "spot_interruption")
        return _view(self.ctx, c, step, tuple(events), target)

    def end(self, step: int) -> None:
        """The step is charged and scored as the policy left the cluster."""
        self.c.settle()
        h = self.usage.history_steps
        account(
            self.ledger,
            self.c,
            step,
            self.usage.cpu[:, h + step],
            self.usage.memory_gib[:, h + step],
            deps=self.deps,
            tenant_of=self.tenant_of,
        )

    def finish(self, warnings: Iterable[str] = ()) -> RunResult:
        out, c = self.out, self.c
        out.events = self.timeline + out.events
        out.sched_latency_s = list(c.sched_latency_s)
        out.migrations = c.migrations
        out.migration_cost = c.migrations * self.fleet.costs.migration_per_replica
        out.warnings = list(warnings)
        return out


def _with_surge(usage: Usage, sc: Scenario) -> Usage:
    """Usage as it happens: the surge's demand on top of the trace (what policies then observe)."""
    if sc.surge_start < 0:
        return usage
    cpu, mem = usage.cpu.copy(), usage.memory_gib.copy()
    window = slice(usage.history_steps + sc.surge_start, usage.history_steps + sc.surge_end)
    cpu[sc.surge_workloads, window] *= sc.surge_factor
    mem[sc.surge_workloads, window] *= sc.surge_factor
    return Usage(cpu=cpu, memory_gib=mem, history_steps=usage.history_steps)


def _view(ctx: SimContext, c: Cluster, step: int, events: tuple[Event, ...], target: IntArray) -> StepView:
    seen = ctx.usage.history_steps + step  # usage up to, not including, this step
    return StepView(
        step=step,
        now_s=c.now_s,
        events=events,
        cpu_seen=ctx.usage.cpu[:, :seen],
        memory_seen=ctx.usage.memory_gib[:, :seen],
        replicas=target,
    )


def _target_replicas(base: IntArray, scenario: Scenario, step: int) -> IntArray:
    f = scenario.surge(step)
    if f == 1.0:
        return base
    return np.where(scenario.surge_workloads, np.ceil(base * f - 1e-9).astype(np.int64), base)


def _apply(c: Cluster, sc: Scenario, step: int, target: IntArray, out: RunResult) -> list[Event]:
    """Make the scenario's events of this step happen to the cluster; the spot reclaims drawn."""
    t = c.market.table
    if step == sc.price_step:
        c.price = np.where(sc.price_pools, c.price * sc.price_factor, c.price)
        c.version += 1
    down = sc.site_down(step)
    now_down = {down} if down >= 0 else set()
    if now_down != c.down:
        c.down = now_down
        c.version += 1
    live = c.nodes
    if down >= 0:
        for node in live[c.node_site(live) == down].tolist():
            c.terminate(node)
    for k in np.flatnonzero(target != c.alive_count).tolist():
        diff = int(target[k] - c.alive_count[k])
        if diff > 0:
            c.add_replicas(k, diff)
        else:
            c.remove_replicas(k, -diff)
    live = c.nodes
    spot = live[t.cap_idx[c.node_pool[live]] == SPOT]
    events: list[Event] = []
    if len(spot):
        pools = c.node_pool[spot]
        order = np.lexsort((c.node_rank_key[spot], pools))
        spot, pools = spot[order], pools[order]
        first = np.searchsorted(pools, pools, side="left")
        rank = np.arange(len(spot)) - first
        hit = sc.reclaimed(step, pools, rank)
        for node in spot[hit].tolist():
            affected = len(c.replicas_on(node))
            c.terminate(node)
            out.spot_interruptions += 1
            out.replicas_interrupted += affected
            events.append(Event(step, "spot_interruption", t.pools[int(c.node_pool[node])].id))
    return events


def _dependencies(fleet: FleetIn) -> Dependencies:
    index = {w.name: k for k, w in enumerate(fleet.workloads)}
    src, dst, gib = [], [], []
    for k, w in enumerate(fleet.workloads):
        for d in w.depends_on:
            src.append(k)
            dst.append(index[d.workload])
            gib.append(d.gib_per_hour)
    return Dependencies(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(gib, dtype=np.float64))
