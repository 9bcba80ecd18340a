"""`broker`: forecast-sized requests, placed by the broker's own solver across every allowed site.

- Requests: CPU from the p95 forecast plus headroom, memory from the weekly peak plus headroom
  (policies/sizing.py), re-sized at every re-plan and whenever usage outgrows them.
- Placement: `broker.solver.solve` over every pool the workload's constraints allow (residency,
  latency SLOs, spot where tolerated, failed sites excluded, prices as of now).
- Pending replicas (a reclaimed spot node, a failed site, a surge): bound at once where sized
  room is left (kube-scheduler-style), the rest solved as one small request and launched.
- Re-plan every `replan_hours`, after a price change or a site's recovery, and when usage
  outgrows the requests: the whole fleet is solved again with the placement in force as
  `current` and each move priced (`migration_per_replica` over `payback_hours`), and the new
  placement is taken only if it pays for its moves within `payback_hours` (as
  broker/dispatch/replan.py decides) or the running one no longer holds the new requests.
  Moves are make-before-break, at most `disruption_budget` replicas in flight at once.
- Bursts past the forecast (`burst_room`, `burst_spread`): a workload sized below its declared
  request is placed on nodes that hold its declared request, one replica per node, so its
  replicas do not burst together on a node and each burst meets other workloads' idle cores.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import replace

import numpy as np

from broker.core.domain import PlacementRequest, PlacementResult, UserRegion
from broker.core.pooltable import BoolArray, IntArray
from broker.core.requirements import Requirement
from broker.errors import BrokerError
from broker.kube_model import EPS, first_fit_decreasing
from broker.simulate.cluster import GONE, READY, Cluster
from broker.simulate.fleet import STEP_S, STEPS_PER_DAY, FleetIn
from broker.simulate.market import Market
from broker.simulate.policies.base import Requests, SimContext, StepView, plan_moves, schedule
from broker.simulate.policies.bridge import bridge
from broker.simulate.policies.sizing import Sizer
from broker.simulate.policies.spread import NO_LIMIT, PerNode
from broker.solver import SolverOptions, WorkLimits, solve

log = logging.getLogger(__name__)

REPLAN_EVENTS = {"price_change", "outage_end", "surge_end"}
DRIFT_WINDOW = 3  # steps of usage above the requests that trigger a re-size
DRIFT_COOLDOWN_S = 3600.0
CPU_GRID = 0.1  # cores
MEMORY_GRID = 0.25  # GiB


class BrokerPolicy:
    name = "broker"

    def __init__(self, fleet: FleetIn, market: Market) -> None:
        cfg = fleet.policies.broker
        self.cfg = cfg
        self.market = market
        self.fleet = fleet
        self.req = self.declared = Requests.declared(market)
        self.sizer = Sizer(
            cfg.forecast, int(cfg.forecast_hours * 3600 / STEP_S), cfg.headroom_pct / 100.0, cfg.calibrate_headroom
        )
        self.migration_cost = fleet.costs.migration_per_replica
        self.next_replan_s = cfg.replan_hours * 3600.0
        self.last_drift_s = -np.inf
        self.queue: list[tuple[int, int]] = []  # (replica, target node) moves waiting for the budget
        self.solves = 0
        self.cut_short = False  # a solve ran into its time limit before its work limits
        self.warnings: list[str] = []
        self.options: SolverOptions | None = None
        self.replans = 0
        self.own_limit = np.array([w.max_per_node or NO_LIMIT for w in market.workloads], dtype=np.int64)

    def start(self, ctx: SimContext) -> None:
        # the simulator reads no savings: the answer's baselines are not priced
        limits = self.cfg.work_limits
        self.options = replace(
            ctx.solver_options or SolverOptions(),
            price_baselines=False,
            work_limits=None if limits is None else WorkLimits(**limits.model_dump()),
        )
        cpu, _ = ctx.history()
        self.sizer.fit(cpu)

    # ---- every step ----------------------------------------------------------------

    def decide(self, c: Cluster, view: StepView) -> None:
        if c.instant:
            self._resize(view, np.arange(len(self.market.workloads)))
            self._place_all(c, view, current=False)
            return
        pending = c.pending()
        if len(pending):
            self._place_pending(c, view, pending)
        if c.now_s >= self.next_replan_s or any(e.kind in REPLAN_EVENTS for e in view.events):
            self.next_replan_s = c.now_s + self.cfg.replan_hours * 3600.0
            self.replans += 1
            self._resize(view, np.arange(len(self.market.workloads)))
            if not self._place_all(c, view, current=True):
                self._relieve(c)
        else:
            drift = self._drifting(view)
            if len(drift) and c.now_s - self.last_drift_s >= DRIFT_COOLDOWN_S:
                self.last_drift_s = c.now_s
                self._resize(view, drift)
                self._relieve(c)
        self._run_queue(c)

    def _drifting(self, view: StepView) -> IntArray:
        seen = view.cpu_seen[:, -DRIFT_WINDOW:]
        held = (self.req.cpu * view.replicas)[:, None]
        return np.flatnonzero((seen > held + EPS).all(axis=1))

    def _resize(self, view: StepView, rows: IntArray) -> None:
        if view.cpu_seen.shape[1] < STEPS_PER_DAY:  # under a day of usage: nothing to size from yet
            return
        reps = view.replicas
        cpu = self.req.cpu.copy()
        mem = self.req.memory_gib.copy()
        cpu[rows] = self.sizer.cpu(view.cpu_seen, rows, reps, self.declared.cpu)
        mem[rows] = self.sizer.memory(view.memory_seen, rows, reps)
        # the last hour's highest use is a floor: a forecast must not undercut what runs now
        recent = view.cpu_seen[rows, -STEPS_PER_DAY // 24 :].max(axis=1) / np.maximum(reps[rows], 1)
        cpu[rows] = np.maximum(cpu[rows], recent * (1.0 + self.sizer.headroom))
        # rounded up to a grid, as VPA-style recommenders round: fewer distinct sizes make fewer
        # replica classes for the solver, which then closes its gap sooner
        cpu[rows] = np.ceil(cpu[rows] / CPU_GRID - EPS) * CPU_GRID
        mem[rows] = np.ceil(mem[rows] / MEMORY_GRID - EPS) * MEMORY_GRID
        self.req = Requests(cpu, mem, self.req.gpus)

    # ---- placing -------------------------------------------------------------------

    def _limits(self) -> IntArray:
        """Per workload, the replicas one node may hold: its own spread.max_per_node, and one
        with `burst_spread` when it is sized below its declared request (it may burst back to
        it: two replicas on a node would burst there together)."""
        if not self.cfg.burst_spread:
            return self.own_limit
        return np.where(self._bursty(), np.minimum(self.own_limit, 1), self.own_limit)

    def _bursty(self) -> BoolArray:
        """Per workload: sized below its declared request, so it may burst back to it."""
        bursty: BoolArray = self.declared.cpu > self.req.cpu + EPS
        return bursty

    def _per_node(self, c: Cluster) -> PerNode:
        return PerNode(c, self._limits())

    def _request(self, name: str, counts: dict[int, int], *, with_deps: bool) -> PlacementRequest:
        workloads = []
        limits, bursty = self._limits(), self._bursty()
        names = {self.market.workloads[k].name for k in counts}
        for k, n in counts.items():
            w = self.market.workloads[k]
            deps = tuple(d for d in w.depends_on if d.workload in names) if with_deps else ()
            requirements = w.requirements
            if self.cfg.burst_room and bursty[k]:
                # the node must hold a replica at its declared size: a burst past the forecast
                # then meets idle neighbours' cores, not the node's end (within the same spend:
                # a larger node of the same family costs the same per core)
                at_least = Requirement.parse("vcpus", "Gt", [f"{float(self.declared.cpu[k]) - 0.01:g}"])
                requirements = (*requirements, at_least)
            if self.cfg.min_node_vcpus > 0:
                floor = Requirement.parse("vcpus", "Gt", [f"{self.cfg.min_node_vcpus - 0.01:g}"])
                requirements = (*requirements, floor)
            workloads.append(
                replace(
                    w,
                    replicas=n,
                    cpu=float(self.req.cpu[k]),
                    memory_gib=float(self.req.memory_gib[k]),
                    depends_on=deps,
                    min_sites=min(w.min_sites, n),
                    requirements=requirements,
                    max_per_node=None if limits[k] >= NO_LIMIT else int(limits[k]),
                )
            )
        regions = tuple(UserRegion(u.name, u.lat, u.lon, u.site) for u in self.market.user_regions)
        return PlacementRequest(
            name=name,
            workloads=tuple(workloads),
            user_regions=regions,
            horizon_hours=self.cfg.payback_hours,
            time_limit_s=self.cfg.time_limit_s,
            migration_cost_per_replica=self.migration_cost,
        )

    def _solve(
        self, c: Cluster, request: PlacementRequest, current: dict[str, dict[str, int]]
    ) -> PlacementResult | None:
        problem = replace(self.market.problem(request, down=sorted(c.down), price=c.price), current=current)
        self.solves += 1
        try:
            result = solve(problem, time_limit_s=self.cfg.time_limit_s, seed=self.fleet.seed, options=self.options)
        except BrokerError:  # nothing fits right now (a failed site, say): the replicas wait
            return None
        if not self.cut_short and any(w.startswith("work limits:") for w in result.warnings):
            self.cut_short = True
            said = (
                f"broker policy: a solve at {c.now_s:.0f} s ran into time_limit_s ({self.cfg.time_limit_s:g} s) "
                "before its work limits; this run's figures depend on the machine's speed (raise time_limit_s)"
            )
            log.warning("%s", said)
            self.warnings.append(said)  # the run's result carries it: the API's document, the CLI
        return result

    def _place_pending(self, c: Cluster, view: StepView, pending: IntArray) -> None:
        feasible = self.market.feasible
        ready = c.node_state[: c.n_nodes] == READY
        per_node = self._per_node(c)
        left = schedule(c, pending, self.req, feasible, nodes_ok=ready, per_node=per_node)
        bridged = np.zeros(0, dtype=np.int64)
        if self.cfg.bridge and len(left):  # run now where use leaves room, moved once a home is up
            # the spread's limits do not hold here: a bridge lasts minutes, and a replica that
            # waits is surely unavailable, one beside its own only may burst with it
            bridged = bridge(c, view, left, feasible, self.cfg.bridge_margin_pct / 100.0)
            left = np.setdiff1d(left, bridged)
        left = schedule(c, left, self.req, feasible, per_node=per_node)
        left = np.concatenate([left, self._rehome(c, bridged)])
        if len(left) == 0:
            return
        counts = {int(k): int(n) for k, n in zip(*np.unique(c.rep_w[left], return_counts=True), strict=True)}
        result = self._solve(c, self._request("pending", counts, with_deps=False), {})
        if result is None:
            return
        self._realise(c, result, left)

    def _rehome(self, c: Cluster, bridged: IntArray) -> IntArray:
        """Bridged replicas' homes: room under the requests on another node (a starting one
        too), moved there make-before-break; returns those that found none (they get new nodes)."""
        n = c.n_nodes
        usable = (c.node_state[:n] != GONE) & ~c.node_drain[:n]
        left: list[int] = []
        per_node = self._per_node(c)
        for r in bridged.tolist():
            ok = usable.copy()
            ok[int(c.rep_node[r])] = False
            target = plan_moves(c, np.array([r]), self.req, ok, self.market.feasible, per_node)
            if target is None:
                left.append(r)
            else:
                c.move(r, target[0])
        return np.array(left, dtype=np.int64)

    def _place_all(self, c: Cluster, view: StepView, *, current: bool) -> bool:
        """Solve the whole fleet; realise the answer if it is worth its moves. Whether it was."""
        counts = {k: int(n) for k, n in enumerate(view.replicas.tolist()) if n > 0}
        running = self._current(c) if current else {}
        result = self._solve(c, self._request(self.fleet.name, counts, with_deps=True), running)
        if result is None:
            return False
        if current and not self._worth_it(c, result, running):
            return False
        self.queue.clear()
        self._realise(c, result, c.alive(), keep=current)
        return True

    def _relieve(self, c: Cluster) -> None:
        """Nodes whose replicas' new requests no longer fit: move the largest replicas off them,
        to room left elsewhere, else to new nodes solved for them. The rest stays where it is."""
        live = c.nodes
        free = c.free(self.req.cpu, self.req.memory_gib, self.req.gpus)
        over = live[(free[:2, live] < -EPS).any(axis=0)]
        if len(over) == 0:
            return
        evict: list[int] = []
        for node in over.tolist():
            reps = np.flatnonzero(
                c.rep_alive[: c.n_reps] & (c.rep_node[: c.n_reps] == node) & (c.rep_move[: c.n_reps] < 0)
            )
            reps = reps[np.argsort(-self.req.cpu[c.rep_w[reps]], kind="stable")]
            short = np.maximum(-free[:, node], 0.0)
            for r in reps.tolist():
                if (short <= EPS).all():
                    break
                evict.append(r)
                short -= self.req.of(int(c.rep_w[r]))
        n = c.n_nodes
        usable = (c.node_state[:n] != GONE) & ~c.node_drain[:n]
        usable[over] = False
        left: list[int] = []
        per_node = self._per_node(c)
        for r in evict:
            target = plan_moves(c, np.array([r]), self.req, usable, self.market.feasible, per_node)
            if target is None:
                left.append(r)
            else:
                c.move(r, target[0])
        if left:
            rest = np.array(left, dtype=np.int64)
            counts = {int(k): int(m) for k, m in zip(*np.unique(c.rep_w[rest], return_counts=True), strict=True)}
            result = self._solve(c, self._request("relieve", counts, with_deps=False), {})
            if result is not None:
                self._realise(c, result, rest)

    def _current(self, c: Cluster) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = defaultdict(dict)
        t = self.market.table
        for r in c.alive().tolist():
            node = int(c.rep_node[r])
            if node < 0:
                continue
            pid = t.pools[int(c.node_pool[node])].id
            name = self.market.workloads[int(c.rep_w[r])].name
            out[pid][name] = out[pid].get(name, 0) + 1
        return dict(out)

    def _worth_it(self, c: Cluster, result: PlacementResult, running: dict[str, dict[str, int]]) -> bool:
        """replan.py's rule, with a floor: move when the saving is at least `min_saving_pct` of
        what runs now and, over the payback horizon, beats the moves' cost."""
        live = c.nodes
        now = float(c.price[c.node_pool[live]].sum())
        moved = 0
        for a in result.assignments:
            kept = running.get(a.pool, {}).get(a.workload, 0)
            moved += max(0, a.replicas - kept)
        saving = now - (result.cost_per_hour - result.egress_cost_per_hour - result.storage_cost_per_hour)
        if saving < now * self.cfg.min_saving_pct / 100.0:
            return False
        return saving * self.cfg.payback_hours > moved * self.migration_cost

    def _realise(self, c: Cluster, result: PlacementResult, replicas: IntArray, *, keep: bool = False) -> None:
        """Turn the solver's pools and replica counts into nodes: replicas already on a pool the
        plan keeps stay on their node while it holds them; the rest are packed first-fit onto
        room left on the pool's nodes, then onto new nodes; nodes nothing is left on are drained."""
        t = self.market.table
        index = {w.name: k for k, w in enumerate(self.market.workloads)}
        want: dict[int, dict[int, int]] = defaultdict(dict)  # pool -> workload -> replicas
        for a in result.assignments:
            want[t.pool_index[a.pool]][index[a.workload]] = a.replicas
        n = c.n_nodes
        cap = np.vstack(c.node_capacity())
        held = np.zeros((3, n))
        limits = self._limits()
        on_node: dict[tuple[int, int], int] = defaultdict(int)  # (workload, node) -> replicas held
        placed: set[int] = set()
        if keep:
            for r in replicas.tolist():
                node = int(c.rep_node[r])
                if node < 0 or c.node_state[node] == GONE or c.node_drain[node]:
                    continue
                pool, k = int(c.node_pool[node]), int(c.rep_w[r])
                need = self.req.of(k)
                if (
                    want[pool].get(k, 0) > 0
                    and on_node[(k, node)] < limits[k]
                    and (held[:, node] + need <= cap[:, node] + EPS).all()
                ):
                    want[pool][k] -= 1
                    held[:, node] += need
                    on_node[(k, node)] += 1
                    placed.add(r)
        todo: dict[int, list[int]] = defaultdict(list)  # pool -> replicas to put there
        spare = [r for r in replicas.tolist() if r not in placed]
        by_w: dict[int, list[int]] = defaultdict(list)
        for r in spare:
            by_w[int(c.rep_w[r])].append(r)
        for pool, per in want.items():
            for k, count in per.items():
                todo[pool] += by_w[k][:count]
                del by_w[k][:count]
        used = np.zeros(n, dtype=bool)
        for node in {int(c.rep_node[r]) for r in placed}:
            used[node] = True
        moves: list[tuple[int, int]] = []
        for pool, reps in todo.items():
            nodes = (
                np.flatnonzero((c.node_pool[:n] == pool) & (c.node_state[:n] != GONE) & ~c.node_drain[:n])
                if keep
                else np.zeros(0, dtype=np.int64)
            )
            rest: list[int] = []
            for r in reps:
                k = int(c.rep_w[r])
                need = self.req.of(k)
                ok = nodes[(held[:, nodes] + need[:, None] <= cap[:, nodes] + EPS).all(axis=0)] if len(nodes) else nodes
                ok = np.array([node for node in ok.tolist() if on_node[(k, node)] < limits[k]], dtype=np.int64)
                if len(ok):
                    node = int(ok[0])
                    held[:, node] += need
                    on_node[(k, node)] += 1
                    used[node] = True
                    moves.append((r, node))
                else:
                    rest.append(r)
            if rest:
                sizes = np.array([self.req.of(int(c.rep_w[r])) for r in rest])
                groups = c.rep_w[np.array(rest, dtype=np.int64)]
                capacity = np.array([t.vcpus[pool], t.memory_gib[pool], t.gpus[pool]])
                where, bins = first_fit_decreasing(sizes, capacity, groups, limits)
                if int(t.site_idx[pool]) in c.down:
                    continue
                new = [c.launch(pool) for _ in range(bins)]
                moves += [(r, new[b]) for r, b in zip(rest, where.tolist(), strict=True) if b >= 0]
        for r, node in moves:
            if c.rep_node[r] < 0:
                c.bind(r, node)
            else:
                self.queue.append((r, node))
        if keep:
            live = np.flatnonzero((c.node_state[:n] != GONE) & ~used[:n])
            for node in live.tolist():
                c.drain(node)

    def _run_queue(self, c: Cluster) -> None:
        """Start queued moves while fewer than `disruption_budget` replicas are moving."""
        moving = int((c.rep_alive[: c.n_reps] & (c.rep_move[: c.n_reps] >= 0)).sum())
        room = self.cfg.disruption_budget - moving
        while self.queue and room > 0:
            r, node = self.queue.pop(0)
            if not c.rep_alive[r] or c.node_state[node] == GONE:
                continue
            if c.rep_node[r] < 0:
                c.bind(r, node)
            else:
                c.move(r, node)
                room -= 1
