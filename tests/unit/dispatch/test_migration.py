"""The migration planner: ordering, disruption budget, capacity never dips, rollback."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.dispatch.migration import (
    MigrationPlan,
    Slot,
    dependency_order,
    plan_migration,
    rollback_after,
    state_after,
)

POOLS = ["a:1/x/spot", "a:1/y/ondemand", "b:2/x/spot", "c:3/z/reserved", "edge:e/n/reserved"]


def _counts(slots: list[Slot]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    for s in slots:
        out[(s.workload, s.pool)] += s.replicas
    return {k: v for k, v in out.items() if v}


def _per_workload(counts: dict[tuple[str, str], int]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for (w, _), n in counts.items():
        out[w] += n
    return out


placements = st.dictionaries(
    st.tuples(st.sampled_from(["api", "db", "cache"]), st.sampled_from(POOLS)), st.integers(1, 40), max_size=8
).map(lambda d: [Slot(w, p, p.split("/")[0], n) for (w, p), n in sorted(d.items())])


def _check_invariants(old: list[Slot], new: list[Slot], plan: MigrationPlan, deps: dict[str, list[str]]) -> None:
    # the plan ends exactly at the new placement
    assert _counts(state_after(old, plan.steps, len(plan.steps))) == _counts(new)
    # no wave starts or stops more replicas than the budget
    moved: dict[int, int] = defaultdict(int)
    for s in plan.steps:
        moved[s.wave] += abs(s.to_replicas - s.from_replicas)
    assert all(v <= plan.disruption_budget for v in moved.values())
    # capacity per workload never drops below the smaller of before and after
    floor = {w: min(n, _per_workload(_counts(new)).get(w, 0)) for w, n in _per_workload(_counts(old)).items()}
    for i in range(len(plan.steps) + 1):
        now = _per_workload(_counts(state_after(old, plan.steps, i)))
        assert all(now.get(w, 0) >= f for w, f in floor.items())
    # per workload: new replicas, then traffic 10 -> 50 -> 100, then old replicas go
    for w in {s.workload for s in plan.steps}:
        kinds = [s.action for s in plan.steps if s.workload == w]
        assert kinds == sorted(kinds, key=["scale_up", "shift_traffic", "scale_down"].index)
        pct = [s.traffic_pct for s in plan.steps if s.workload == w and s.action == "shift_traffic"]
        assert pct in ([], [10, 50, 100])
    # removals start only after every scale-up (old replicas removed last)
    ups = [s.index for s in plan.steps if s.action == "scale_up"]
    downs = [s.index for s in plan.steps if s.action == "scale_down"]
    if ups and downs:
        assert max(ups) < min(downs)
    # what others depend on scales up first and is removed last
    first_up = {s.workload: s.index for s in reversed(plan.steps) if s.action == "scale_up"}
    last_down = {s.workload: s.index for s in plan.steps if s.action == "scale_down"}
    for w, ds in deps.items():
        for d in ds:
            if w in first_up and d in first_up:
                assert first_up[d] < first_up[w]
            if w in last_down and d in last_down:
                assert last_down[d] > last_down[w]


@settings(max_examples=80, deadline=None)
@given(old=placements, new=placements, budget=st.integers(1, 15))
def test_plans_keep_every_invariant(old: list[Slot], new: list[Slot], budget: int) -> None:
    deps = {"api": ["db", "cache"], "cache": ["db"]}
    plan = plan_migration(old, new, depends_on=deps, disruption_budget=budget, cost_per_moved_replica=0.1)
    _check_invariants(old, new, plan, deps)
    # the rollback is a plan with the same guarantees, back to where we started
    back = MigrationPlan(plan.rollback, plan.order, 0, 0, 0, 0.0, budget)
    _check_invariants(new, old, back, deps)


@settings(max_examples=40, deadline=None)
@given(old=placements, new=placements, budget=st.integers(1, 8), data=st.data())
def test_rollback_from_any_step_returns_to_the_old_placement(
    old: list[Slot], new: list[Slot], budget: int, data: st.DataObject
) -> None:
    plan = plan_migration(old, new, disruption_budget=budget, with_rollback=False)
    done = data.draw(st.integers(0, len(plan.steps)))
    back = rollback_after(old, plan, done)
    reached = state_after(old, plan.steps, done)
    assert _counts(state_after(reached, back.steps, len(back.steps))) == _counts(old)


def test_moved_replicas_and_cost() -> None:
    old = [Slot("api", "a:1/x/spot", "a:1", 6), Slot("db", "a:1/y/ondemand", "a:1", 2)]
    new = [
        Slot("api", "b:2/x/spot", "b:2", 4),
        Slot("api", "a:1/x/spot", "a:1", 3),
        Slot("db", "a:1/y/ondemand", "a:1", 2),
    ]
    plan = plan_migration(old, new, disruption_budget=2, cost_per_moved_replica=0.5)
    # api: 4 new replicas, 3 removed -> 3 moved, 1 added by demand; db stays
    assert (plan.moved_replicas, plan.added_replicas, plan.removed_replicas) == (3, 4, 3)
    assert plan.migration_cost == pytest.approx(1.5)
    assert [s.action for s in plan.steps].count("scale_up") == 2  # 4 replicas in chunks of 2


@pytest.mark.parametrize(
    ("deps", "order"),
    [
        ({"api": ["db"]}, ["db", "api"]),
        ({"api": ["db", "cache"], "cache": ["db"]}, ["db", "cache", "api"]),
        ({"api": ["db"], "db": ["api"]}, ["api", "db"]),  # a cycle keeps name order, nothing is lost
        ({"api": ["unknown"]}, ["api", "cache", "db"]),
    ],
)
def test_dependency_order(deps: dict[str, list[str]], order: list[str]) -> None:
    names = {"api", "db"} | ({"cache"} if "cache" in str(deps) or "unknown" in str(deps) else set())
    assert dependency_order(names, deps) == order


@pytest.mark.parametrize(("budget", "steps"), [(0, (10, 50, 100)), (3, (50, 10, 100)), (3, (10, 50))])
def test_bad_parameters_are_refused(budget: int, steps: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        plan_migration([], [], disruption_budget=budget, traffic_steps=steps)
