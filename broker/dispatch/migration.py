"""How to move from one placement to another safely (pure: no clock, I/O or randomness).

Order of a migration:
1. scale up new replicas, workloads that others depend on first (so a moved
   API finds its moved database ready);
2. shift each workload's traffic progressively (e.g. 10 % -> 50 % -> 100 %)
   once its new replicas are up;
3. remove old replicas last, dependents first and what they depend on last.

No wave starts or stops more than `disruption_budget` replicas. The rollback of
a plan, or of a plan interrupted after any step, is itself a plan computed the
same way from the state reached back to the old placement.

The forward plan is then scheduled (`wave_schedule.py`): every step gets a start and an end in
seconds, under each workload's `max_unavailable` too, minimising the time until the new
placement is in force; steps that start together form a wave.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from broker.core.domain import Assignment
from broker.dispatch.wave_schedule import Schedule, Timing, schedule_steps

Action = Literal["scale_up", "shift_traffic", "scale_down"]
Scheduler = Literal["cp-sat", "advisory", "none"]
Key = tuple[str, str]  # (workload, pool)


@dataclass(frozen=True, slots=True)
class Slot:
    workload: str
    pool: str
    site: str
    replicas: int


@dataclass(frozen=True, slots=True)
class Step:
    index: int
    wave: int  # steps of one wave run together; a wave moves at most the disruption budget
    action: Action
    workload: str
    pool: str | None = None
    site: str | None = None
    from_replicas: int = 0
    to_replicas: int = 0
    traffic_pct: int | None = None  # share of the workload's traffic sent to its new pools
    start_s: int | None = None  # seconds from the start of the migration (scheduled plans only)
    end_s: int | None = None

    def to_json(self) -> dict[str, Any]:
        timing = {} if self.start_s is None else {"start_s": self.start_s, "end_s": self.end_s}
        return {
            "index": self.index,
            "wave": self.wave,
            "action": self.action,
            "workload": self.workload,
            "pool": self.pool,
            "site": self.site,
            "from_replicas": self.from_replicas,
            "to_replicas": self.to_replicas,
            "traffic_pct": self.traffic_pct,
            **timing,
        }


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    steps: tuple[Step, ...]
    order: tuple[str, ...]  # workloads, dependencies first
    moved_replicas: int  # replicas that leave one pool for another
    added_replicas: int
    removed_replicas: int
    migration_cost: float
    disruption_budget: int
    rollback: tuple[Step, ...] = field(default=())
    schedule: Schedule | None = None

    @property
    def waves(self) -> int:
        return max((s.wave for s in self.steps), default=0)

    @property
    def makespan_s(self) -> int | None:
        return None if self.schedule is None else self.schedule.makespan_s

    def to_json(self) -> dict[str, Any]:
        return {
            "order": list(self.order),
            "moved_replicas": self.moved_replicas,
            "added_replicas": self.added_replicas,
            "removed_replicas": self.removed_replicas,
            "migration_cost": round(self.migration_cost, 6),
            "disruption_budget": self.disruption_budget,
            "waves": self.waves,
            "steps": [s.to_json() for s in self.steps],
            "rollback": [s.to_json() for s in self.rollback],
            **(
                {}
                if self.schedule is None
                else {"makespan_s": self.schedule.makespan_s, "schedule": self.schedule.to_json(self.steps)}
            ),
        }


def slots_from_assignments(assignments: Iterable[Assignment]) -> list[Slot]:
    return [Slot(a.workload, a.pool, a.site, a.replicas) for a in assignments]


def dependency_order(workloads: Iterable[str], depends_on: Mapping[str, Sequence[str]]) -> list[str]:
    """Workloads with what they depend on first (Kahn, ties by name); cycles fall back to name order."""
    names = sorted(set(workloads))
    known = set(names)
    deps = {w: sorted({d for d in depends_on.get(w, ()) if d in known and d != w}) for w in names}
    users: dict[str, list[str]] = {w: [] for w in names}
    for w, ds in deps.items():
        for d in ds:
            users[d].append(w)
    waiting = {w: len(ds) for w, ds in deps.items()}
    ready = [w for w in names if waiting[w] == 0]
    out: list[str] = []
    while ready:
        ready.sort()
        w = ready.pop(0)
        out.append(w)
        for u in users[w]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    out.extend(w for w in names if w not in out)  # members of a cycle keep a stable order
    return out


def _totals(slots: Iterable[Slot]) -> tuple[dict[Key, int], dict[Key, str]]:
    counts: dict[Key, int] = {}
    sites: dict[Key, str] = {}
    for s in slots:
        k = (s.workload, s.pool)
        counts[k] = counts.get(k, 0) + s.replicas
        sites[k] = s.site
    return counts, sites


class _Builder:
    def __init__(self, budget: int, current: dict[Key, int], sites: dict[Key, str]) -> None:
        self.budget = budget
        self.current = current
        self.sites = sites
        self.steps: list[Step] = []
        self.wave = 0
        self.room = 0  # replicas still allowed to move in the current wave

    def new_wave(self) -> None:
        self.wave += 1
        self.room = self.budget

    def move(self, action: Action, key: Key, target: int) -> None:
        """Bring key's replicas to target in chunks that fit the disruption budget."""
        while self.current.get(key, 0) != target:
            if self.room == 0:
                self.new_wave()
            cur = self.current.get(key, 0)
            chunk = min(abs(target - cur), self.room)
            nxt = cur + chunk if target > cur else cur - chunk
            self.add(action, key[0], key, cur, nxt)
            self.current[key] = nxt
            self.room -= chunk

    def add(self, action: Action, workload: str, key: Key | None, frm: int, to: int, pct: int | None = None) -> None:
        self.steps.append(
            Step(
                index=len(self.steps) + 1,
                wave=self.wave,
                action=action,
                workload=workload,
                pool=key[1] if key else None,
                site=self.sites.get(key) if key else None,
                from_replicas=frm,
                to_replicas=to,
                traffic_pct=pct,
            )
        )


def _steps(
    old: dict[Key, int],
    new: dict[Key, int],
    sites: dict[Key, str],
    order: Sequence[str],
    budget: int,
    traffic_steps: Sequence[int],
) -> list[Step]:
    b = _Builder(budget, dict(old), sites)
    keys = sorted(set(old) | set(new))
    grows = {w: [k for k in keys if k[0] == w and new.get(k, 0) > old.get(k, 0)] for w in order}
    shrinks = {w: [k for k in keys if k[0] == w and new.get(k, 0) < old.get(k, 0)] for w in order}
    for w in order:
        if not grows[w]:
            continue
        b.room = 0  # a workload's first new replicas never share a wave with another workload's
        for k in grows[w]:
            b.move("scale_up", k, new.get(k, 0))
        if shrinks[w]:
            for pct in traffic_steps:
                b.new_wave()
                b.add("shift_traffic", w, None, 0, 0, pct)
            b.room = 0
    for w in reversed(order):
        if not shrinks[w]:
            continue
        b.room = 0
        for k in shrinks[w]:
            b.move("scale_down", k, new.get(k, 0))
    return b.steps


def plan_migration(
    old: Sequence[Slot],
    new: Sequence[Slot],
    *,
    depends_on: Mapping[str, Sequence[str]] | None = None,
    disruption_budget: int = 10,
    traffic_steps: Sequence[int] = (10, 50, 100),
    cost_per_moved_replica: float = 0.0,
    with_rollback: bool = True,
    max_unavailable: Mapping[str, int] | None = None,
    failed_sites: Collection[str] = (),
    timing: Timing | None = None,
    schedule: Scheduler = "cp-sat",
    schedule_time_limit_s: float = 1.0,
) -> MigrationPlan:
    """The ordered, budgeted steps from `old` to `new`, scheduled, and the rollback from `new` back to `old`.

    `max_unavailable` caps each workload's replicas in transition (default: `disruption_budget`);
    replicas at `failed_sites` are gone already. `schedule`: "cp-sat" (times from CP-SAT, the
    advisory times when it finds nothing better), "advisory" (the waves one after the other) or
    "none" (steps only, as before scheduling existed).
    """
    if disruption_budget < 1:
        raise ValueError("disruption_budget must be at least 1")
    limits = {w: n for w, n in (max_unavailable or {}).items()}
    if any(n < 1 for n in limits.values()):
        raise ValueError("max_unavailable must be at least 1")
    if list(traffic_steps) != sorted(set(traffic_steps)) or not traffic_steps or traffic_steps[-1] != 100:
        raise ValueError("traffic_steps must rise strictly and end at 100")
    o, sites_o = _totals(old)
    n, sites_n = _totals(new)
    sites = {**sites_o, **sites_n}
    deps = depends_on or {}
    order = dependency_order({k[0] for k in (*o, *n)}, deps)
    changing = {k[0] for k in set(o) | set(n) if o.get(k, 0) != n.get(k, 0)}
    # the listed waves respect every workload's cap, so timed one after the other they are a
    # valid schedule: the fallback and CP-SAT's first solution
    step_budget = disruption_budget
    if schedule != "none":
        step_budget = min([disruption_budget, *(limits[w] for w in changing if w in limits)])
    steps = _steps(o, n, sites, order, step_budget, traffic_steps)
    timed: Schedule | None = None
    if schedule != "none":
        steps, timed = schedule_steps(
            steps,
            order=order,
            depends_on=deps,
            disruption_budget=disruption_budget,
            max_unavailable={w: limits.get(w, disruption_budget) for w in sorted(changing)},
            failed_sites=failed_sites,
            # old replicas outside the failed sites serve until traffic has moved, kept or not
            serving={k[0] for k, c in o.items() if c > 0 and sites_o[k] not in set(failed_sites)},
            timing=timing,
            time_limit_s=schedule_time_limit_s,
            engine=schedule,
        )
    moved = added = removed = 0
    for w in order:
        up = sum(max(0, n.get(k, 0) - o.get(k, 0)) for k in set(o) | set(n) if k[0] == w)
        down = sum(max(0, o.get(k, 0) - n.get(k, 0)) for k in set(o) | set(n) if k[0] == w)
        moved += min(up, down)
        added += up
        removed += down
    rollback: tuple[Step, ...] = ()
    if with_rollback:
        rollback = tuple(_steps(n, o, sites, order, disruption_budget, traffic_steps))
    return MigrationPlan(
        steps=tuple(steps),
        order=tuple(order),
        moved_replicas=moved,
        added_replicas=added,
        removed_replicas=removed,
        migration_cost=moved * cost_per_moved_replica,
        disruption_budget=disruption_budget,
        rollback=rollback,
        schedule=timed,
    )


def state_after(old: Sequence[Slot], steps: Sequence[Step], done: int) -> list[Slot]:
    """Replicas per pool once the first `done` steps have run."""
    counts, sites = _totals(old)
    for s in steps[:done]:
        if s.pool is not None:
            counts[(s.workload, s.pool)] = s.to_replicas
            if s.site is not None:
                sites[(s.workload, s.pool)] = s.site
    return [Slot(w, p, sites.get((w, p), ""), r) for (w, p), r in sorted(counts.items()) if r > 0]


def rollback_after(
    old: Sequence[Slot],
    plan: MigrationPlan,
    done: int,
    *,
    depends_on: Mapping[str, Sequence[str]] | None = None,
    traffic_steps: Sequence[int] = (10, 50, 100),
    schedule: Scheduler = "cp-sat",
) -> MigrationPlan:
    """The plan back to `old` from wherever a migration stopped (after `done` steps)."""
    reached = state_after(old, plan.steps, done)
    limits = plan.schedule.max_unavailable if plan.schedule is not None else None
    timing = plan.schedule.timing if plan.schedule is not None else None
    return plan_migration(
        reached,
        old,
        depends_on=depends_on,
        disruption_budget=plan.disruption_budget,
        traffic_steps=traffic_steps,
        with_rollback=False,
        max_unavailable=limits,
        timing=timing,
        schedule=schedule,
    )


def resolve_max_unavailable(value: int | str | None, replicas: int, default: int) -> int:
    """A workload's `max_unavailable`: a count, or "N%" of its replicas rounded up (at least 1)."""
    if value is None:
        return default
    if isinstance(value, str):
        return max(1, math.ceil(replicas * int(value.rstrip("%")) / 100))
    return int(value)
