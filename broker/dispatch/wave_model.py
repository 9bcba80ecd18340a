"""The wave-scheduling model as a graph, a greedy list schedule of it, and CP-SAT over it (pure).

Nodes are the timed steps plus zero-length milestones ("all of w's new replicas run", "every
new replica runs", "all of w's old replicas stopped") so that precedence stays linear in the
number of steps; an edge a -> b means b starts once a has ended. Resources: the plan's
disruption budget over every start or stop, and each workload's `max_unavailable` over its own.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.dispatch.migration import Step

SEED = 20260  # fixed: the same plan for the same input, in the replan and at dispatch


@dataclass
class Model:
    dur: list[int]  # per node; steps first (node i = kept[i]), milestones after
    demand: list[int]
    resources: list[tuple[int, list[int]]]  # (capacity, nodes using it)
    preds: list[list[int]] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # node -> index in the step list
    hint: list[int] = field(default_factory=list)  # a feasible start per node (the advisory waves)

    @property
    def steps(self) -> int:
        return len(self.kept)


def failed_down(s: Step, failed: Collection[str]) -> bool:
    return s.action == "scale_down" and s.site in failed


def build(
    steps: Sequence[Step],
    dur: Sequence[int],
    hint: Sequence[tuple[int, int]],
    order: Sequence[str],
    depends_on: Mapping[str, Sequence[str]],
    budget: int,
    max_unavailable: Mapping[str, int],
    failed: Collection[str],
) -> Model:
    kept = [i for i, s in enumerate(steps) if not failed_down(s, failed)]  # failed-site removals go last
    m = Model(
        dur=[dur[i] for i in kept],
        demand=[
            0 if steps[i].action == "shift_traffic" else abs(steps[i].to_replicas - steps[i].from_replicas)
            for i in kept
        ],
        resources=[],
        preds=[[] for _ in kept],
        kept=kept,
        hint=[hint[i][0] for i in kept],
    )
    by: dict[str, dict[str, list[int]]] = {}
    for node, i in enumerate(kept):
        by.setdefault(steps[i].action, {}).setdefault(steps[i].workload, []).append(node)
    ups, downs, shifts = by.get("scale_up", {}), by.get("scale_down", {}), by.get("shift_traffic", {})

    def milestone(preds: list[int]) -> int:
        m.dur.append(0)
        m.demand.append(0)
        m.preds.append(preds)
        m.hint.append(max((m.hint[p] + m.dur[p] for p in preds), default=0))
        return len(m.dur) - 1

    up_done = {w: milestone(ix) for w, ix in ups.items()}
    all_up = milestone(list(up_done.values()))
    pos = {w: k for k, w in enumerate(order)}
    deps = {
        w: sorted({d for d in depends_on.get(w, ()) if d in pos and d != w and pos[d] < pos[w]}) for w in order
    }  # an edge against the order is the back edge of a cycle, which the order broke
    for w, ix in shifts.items():
        m.preds[ix[0]].append(up_done[w])
        for a, b in pairwise(ix):
            m.preds[b].append(a)
    for w, ix in ups.items():
        for node in ix:
            m.preds[node] += [up_done[d] for d in deps.get(w, []) if d in up_done]
    for w, ix in downs.items():
        for node in ix:
            m.preds[node].append(all_up)  # make before break; the planner's order: every up first
            if w in shifts:
                m.preds[node].append(shifts[w][-1])
    down_done = {w: milestone(ix) for w, ix in downs.items()}
    for w in order:
        for d in deps.get(w, []):
            if w in down_done:
                for node in downs.get(d, []):
                    m.preds[node].append(down_done[w])  # callers leave before what they call goes
    moving = [n for n in range(m.steps) if m.demand[n] > 0 and m.dur[n] > 0]
    m.resources.append((budget, moving))
    for w in sorted({steps[kept[n]].workload for n in moving}):
        mine = [n for n in moving if steps[kept[n]].workload == w]
        cap = max_unavailable.get(w, budget)
        if cap < budget and sum(m.demand[n] for n in mine) > cap:
            m.resources.append((cap, mine))
    return m


# ---- greedy: serial schedule generation, longest remaining path first ---------------------


class _Profile:
    """Usage of one resource over time, as a step function."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.ts = [0]
        self.us = [0]  # usage on [ts[k], ts[k+1])

    def earliest(self, t: int, d: int, q: int) -> int:
        while True:
            k = bisect_right(self.ts, t) - 1
            clash = None
            while k < len(self.ts) and self.ts[k] < t + d:
                if self.us[k] + q > self.cap:
                    clash = k
                    break
                k += 1
            if clash is None:
                return t
            t = self.ts[clash + 1]  # a clash never sits on the last (open) segment: usage there is 0

    def _cut(self, t: int) -> int:
        k = bisect_right(self.ts, t) - 1
        if self.ts[k] != t:
            self.ts.insert(k + 1, t)
            self.us.insert(k + 1, self.us[k])
            k += 1
        return k

    def add(self, t: int, d: int, q: int) -> None:
        a, b = self._cut(t), self._cut(t + d)
        for k in range(a, b):
            self.us[k] += q


def _successors(m: Model) -> list[list[int]]:
    succ: list[list[int]] = [[] for _ in m.dur]
    for b, ps in enumerate(m.preds):
        for a in ps:
            succ[a].append(b)
    return succ


def tails(m: Model) -> list[int]:
    """The longest path from each node's start to the end, resources ignored."""
    succ = _successors(m)
    tail = [0] * len(m.dur)
    for v in reversed(_topological(m.preds, succ)):
        tail[v] = m.dur[v] + max((tail[s] for s in succ[v]), default=0)
    return tail


def critical_path(m: Model) -> int:
    """A lower bound on the makespan: the longest chain of precedences."""
    return max(tails(m), default=0)


def heads(m: Model) -> list[int]:
    """The earliest each node can start, resources ignored."""
    head = [0] * len(m.dur)
    for v in _topological(m.preds, _successors(m)):
        head[v] = max((head[p] + m.dur[p] for p in m.preds[v]), default=0)
    return head


def lower_bound(m: Model) -> int:
    """A lower bound on the makespan: the critical path, or a resource's layers if longer.

    Layers: take the nodes of one resource lasting at least p, each cut to its first p seconds
    (still feasible: usage only drops). In any schedule, the nodes starting within the same p
    seconds after the first of them all run at that window's last instant, so each window is
    a bin of the resource's capacity; at least `bins` windows are used (a bin-packing bound on
    their demands), and the last starts (bins - 1) * p after the first. With equal durations
    and a budget that does not divide the demand, this proves the list schedule optimal where
    CP-SAT's energy reasoning alone cannot close the gap.
    """
    tail = tails(m)
    best = max(tail, default=0)
    if not m.resources:
        return best
    head = heads(m)
    for cap, nodes in m.resources:
        timed = [v for v in nodes if m.dur[v] > 0 and m.demand[v] > 0]
        for p in sorted({m.dur[v] for v in timed}):
            these = [v for v in timed if m.dur[v] >= p]
            demand = [m.demand[v] for v in these]
            bins = max(-(-sum(demand) // cap), sum(1 for q in demand if 2 * q > cap))
            first = min(head[v] for v in these)
            after = min(tail[v] - m.dur[v] for v in these)  # the shortest chain after a node ends
            best = max(best, first + bins * p + after)
    return best


def greedy(m: Model) -> list[int]:
    n = len(m.dur)
    succ = _successors(m)
    waiting = [len(p) for p in m.preds]
    tail = tails(m)
    uses: list[list[int]] = [[] for _ in range(n)]
    profiles = []
    for r, (cap, nodes) in enumerate(m.resources):
        profiles.append(_Profile(cap))
        for v in nodes:
            uses[v].append(r)
    start = [0] * n
    ready = [(-tail[v], v) for v in range(n) if waiting[v] == 0]
    heapq.heapify(ready)
    while ready:
        _, v = heapq.heappop(ready)
        t = max((start[p] + m.dur[p] for p in m.preds[v]), default=0)
        while uses[v]:  # the earliest time every resource of v has room for it
            moved = False
            for r in uses[v]:
                nt = profiles[r].earliest(t, m.dur[v], m.demand[v])
                if nt != t:
                    t, moved = nt, True
            if not moved:
                break
        start[v] = t
        for r in uses[v]:
            profiles[r].add(t, m.dur[v], m.demand[v])
        for s in succ[v]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (-tail[s], s))
    return start


def _topological(preds: list[list[int]], succ: list[list[int]]) -> list[int]:
    waiting = [len(p) for p in preds]
    out = [v for v in range(len(preds)) if waiting[v] == 0]
    for v in out:  # grows while iterating: Kahn's queue
        for s in succ[v]:
            waiting[s] -= 1
            if waiting[s] == 0:
                out.append(s)
    return out


def makespan(m: Model, start: Sequence[int]) -> int:
    return max((start[v] + m.dur[v] for v in range(len(m.dur))), default=0)


# ---- CP-SAT ---------------------------------------------------------------------------------


def cpsat(
    m: Model, hint: Sequence[int], time_limit_s: float, bound: int = 0
) -> tuple[list[int], int, int, bool] | None:
    """Starts, makespan, lower bound, proved optimal; None when CP-SAT found no schedule in time.
    `bound`: a makespan no schedule beats (`lower_bound`), which CP-SAT need not prove again."""
    from ortools.sat.python import cp_model  # lazily: only a plan with moves pays the import

    horizon = makespan(m, hint)
    model = cp_model.CpModel()
    n = len(m.dur)
    start = [model.new_int_var(0, horizon - m.dur[v], "") for v in range(n)]
    for v in range(n):
        model.add_hint(start[v], hint[v])
        for p in m.preds[v]:
            model.add(start[v] >= start[p] + m.dur[p])
    for cap, nodes in m.resources:
        intervals = [model.new_fixed_size_interval_var(start[v], m.dur[v], "") for v in nodes]
        model.add_cumulative(intervals, [m.demand[v] for v in nodes], cap)
    span = model.new_int_var(min(bound, horizon), horizon, "makespan")
    for v in range(n):
        model.add(span >= start[v] + m.dur[v])
    model.add_hint(span, horizon)  # a complete hint is taken as the first solution
    model.minimize(span)
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = 1  # deterministic, and one core of a shared machine
    params.random_seed = SEED
    params.max_time_in_seconds = time_limit_s
    params.max_deterministic_time = time_limit_s  # binds first on a normal machine: the same answer every run
    params.log_search_progress = False
    params.log_to_stdout = False
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    starts = [int(solver.value(s)) for s in start]
    lower = max(bound, int(solver.best_objective_bound))
    return starts, int(solver.value(span)), lower, status == cp_model.OPTIMAL
