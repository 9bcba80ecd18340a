"""An independent checker of a scheduled migration plan (shares no code with the scheduler).

It replays the steps in time and asserts what docs/dispatch.md promises: the plan ends at the
new placement; every step lasts what the model says (node start-up per provider, drain,
traffic dwell); dependency order; make before break and the capacity floor; the plan's
disruption budget and each workload's max_unavailable at every moment; waves are start times.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

from broker.core.node_startup import NODE_STARTUP_S
from broker.dispatch.migration import MigrationPlan, Slot, Step

DRAIN_S, TRAFFIC_S = 30, 60


def _counts(slots: Sequence[Slot]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    for s in slots:
        out[(s.workload, s.pool)] += s.replicas
    return {k: v for k, v in out.items() if v}


def _per_workload(counts: Mapping[tuple[str, str], int]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for (w, _), n in counts.items():
        out[w] += n
    return out


def _expected_length(s: Step, failed: Collection[str], live: set[str]) -> int:
    if s.action == "scale_up":
        return int(NODE_STARTUP_S.get((s.site or "").split(":")[0], 240))
    if s.action == "shift_traffic":
        return TRAFFIC_S if s.workload in live else 0
    return 0 if s.site in failed else DRAIN_S


def _in_transition(s: Step, failed: Collection[str]) -> int:
    if s.action == "shift_traffic" or (s.action == "scale_down" and s.site in failed):
        return 0
    return abs(s.to_replicas - s.from_replicas)


def check_schedule(
    old: Sequence[Slot],
    new: Sequence[Slot],
    plan: MigrationPlan,
    *,
    depends_on: Mapping[str, Sequence[str]],
    budget: int,
    max_unavailable: Mapping[str, int],
    failed: Collection[str] = (),
) -> dict[str, int]:
    """Raises AssertionError on the first broken promise; returns the peak in-transition per workload."""
    steps = plan.steps
    assert plan.schedule is not None
    # ends at the new placement, replaying steps in index order
    counts = dict(_counts(old))
    for s in steps:
        if s.pool is not None:
            assert counts.get((s.workload, s.pool), 0) == s.from_replicas, s
            counts[(s.workload, s.pool)] = s.to_replicas
    assert {k: v for k, v in counts.items() if v} == _counts(new)
    # times: every step timed, as long as the model says, in start order, waves = start times
    # a workload still serves from an old replica at a site that did not fail, stopped or kept
    live = {s.workload for s in old if s.replicas > 0 and s.site not in failed}
    for s in steps:
        assert s.start_s is not None and s.end_s is not None and s.start_s >= 0
        assert s.end_s - s.start_s == _expected_length(s, failed, live), s
    assert [s.index for s in steps] == list(range(1, len(steps) + 1))
    assert [s.start_s for s in steps] == sorted(s.start_s or 0 for s in steps)
    wave_start: dict[int, int] = {}
    for s in steps:
        assert wave_start.setdefault(s.wave, s.start_s or 0) == s.start_s
    assert list(wave_start) == sorted(wave_start) and sorted(wave_start.values()) == list(wave_start.values())
    makespan = max((s.end_s or 0 for s in steps), default=0)
    assert plan.schedule.makespan_s == makespan
    assert plan.schedule.lower_bound_s <= makespan

    def ends(ss: Sequence[Step]) -> int:
        return max((s.end_s or 0 for s in ss), default=0)

    ups = [s for s in steps if s.action == "scale_up"]
    live_downs = [s for s in steps if s.action == "scale_down" and s.site not in failed]
    # make before break: no old replica stops before every new one runs, and the workload's
    # traffic has moved; replicas at failed sites are removed last
    for d in live_downs:
        assert (d.start_s or 0) >= ends(ups), d
        assert (d.start_s or 0) >= ends([s for s in steps if s.workload == d.workload and s.action == "shift_traffic"])
    for s in steps:
        if s.action == "scale_down" and s.site in failed:
            assert s.start_s == makespan
        if s.action == "shift_traffic":
            assert (s.start_s or 0) >= ends([u for u in ups if u.workload == s.workload])
    # dependency order: callers change once what they call runs its new replicas; what they
    # call stops its old replicas once the callers stopped theirs
    for w, ds in depends_on.items():
        for d in ds:
            d_up_end = ends([u for u in ups if u.workload == d])
            for s in steps:
                if s.workload == w and s.action in ("scale_up", "shift_traffic"):
                    assert (s.start_s or 0) >= d_up_end, (w, d, s)
            w_down_end = ends([x for x in live_downs if x.workload == w])
            for x in live_downs:
                if x.workload == d:
                    assert (x.start_s or 0) >= w_down_end, (w, d, x)
    # budgets and the capacity floor, at every moment something starts or ends
    alive_old = _per_workload({k: v for k, v in _counts(old).items() if k[1].split("/")[0] not in failed})
    target = _per_workload(_counts(new))
    floor = {w: min(n, target.get(w, 0)) for w, n in alive_old.items()}
    peak: dict[str, int] = defaultdict(int)
    for t in sorted({s.start_s or 0 for s in steps} | {s.end_s or 0 for s in steps}):
        busy = [s for s in steps if (s.start_s or 0) <= t < (s.end_s or 0)]
        assert sum(_in_transition(s, failed) for s in busy) <= budget, t
        per: dict[str, int] = defaultdict(int)
        for s in busy:
            per[s.workload] += _in_transition(s, failed)
        for w, n in per.items():
            assert n <= max_unavailable.get(w, budget), (t, w, n)
            peak[w] = max(peak[w], n)
        serving = dict(alive_old)
        for s in steps:
            n = abs(s.to_replicas - s.from_replicas)
            if s.action == "scale_up" and (s.end_s or 0) <= t:
                serving[s.workload] = serving.get(s.workload, 0) + n
            if s.action == "scale_down" and s.site not in failed and (s.start_s or 0) <= t:
                serving[s.workload] = serving.get(s.workload, 0) - n
        for w, f in floor.items():
            assert serving.get(w, 0) >= f, (t, w, serving.get(w, 0), f)
    return dict(peak)
