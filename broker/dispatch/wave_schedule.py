"""When each migration step runs: the planner's waves timed, then re-timed by CP-SAT (pure: no I/O).

The migration planner (`migration.py`) lists the steps and their order; this module gives each
step a start and an end, in seconds from the start of the migration, and minimises the
makespan (the time until the new placement is fully in force). The model:

- a `scale_up` step runs for the node start-up time of its site's provider
  (`broker/core/node_startup.py`, the simulator's figures): new replicas need new nodes;
- a `scale_down` step runs for `drain_s` (the pod's termination grace period); at a failed
  site it takes no time, needs no budget and runs last (those replicas are gone already);
- the `shift_traffic` steps of a workload run one after the other, `traffic_step_s` each,
  after all its scale-ups and before its scale-downs; for a workload whose old replicas are
  all at failed sites they take no time (no traffic left to watch move); an old replica at a
  site that did not fail still serves, whether the plan stops it or keeps it;
- make before break: a workload's old replicas stop only after all its new replicas run, and
  (the planner's documented order) no old replica stops before every new one runs;
- dependency order: a workload starts changing once what it depends on has its new replicas
  running; what it depends on stops old replicas only after it has stopped its own;
- disruption budget: replicas in transition (starting or stopping) never exceed the plan's
  `disruption_budget` in all, nor a workload's `max_unavailable` for that workload.

The planner's waves, run one after the other (each as long as its slowest step), are a
feasible schedule of this model: they are the starting hint, the horizon and the fallback
when CP-SAT finds nothing better in its time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from broker.core.node_startup import NODE_STARTUP_S, node_startup_s, provider_of
from broker.dispatch import wave_model

if TYPE_CHECKING:
    from broker.dispatch.migration import Step


@dataclass(frozen=True, slots=True)
class Timing:
    drain_s: int = 30  # Kubernetes' default terminationGracePeriodSeconds
    traffic_step_s: int = 60  # how long each traffic step is watched before the next
    node_startup_s: Mapping[str, float] = field(default_factory=lambda: dict(NODE_STARTUP_S))

    def startup(self, site: str) -> int:
        provider = provider_of(site)
        return math.ceil(self.node_startup_s.get(provider, node_startup_s(provider)))

    def to_json(self) -> dict[str, Any]:
        return {
            "drain_s": self.drain_s,
            "traffic_step_s": self.traffic_step_s,
            "node_startup_s": dict(sorted(self.node_startup_s.items())),
        }


@dataclass(frozen=True, slots=True)
class Schedule:
    # "cp-sat"; "list" (the greedy list schedule, used when it meets the lower bound, so
    # provably optimal without a search); "advisory" (the planner's waves one after the other)
    engine: str
    status: str  # cp-sat, list: "optimal" | "feasible"; advisory: why no other answer was used
    makespan_s: int
    lower_bound_s: int  # no schedule of these steps finishes sooner
    advisory_makespan_s: int
    solve_ms: float
    max_unavailable: Mapping[str, int]
    timing: Timing

    def to_json(self, steps: Sequence[Step]) -> dict[str, Any]:
        waves: dict[int, list[Step]] = {}
        for s in steps:
            waves.setdefault(s.wave, []).append(s)
        return {
            "engine": self.engine,
            "status": self.status,
            "makespan_s": self.makespan_s,
            "lower_bound_s": self.lower_bound_s,
            "advisory_makespan_s": self.advisory_makespan_s,
            "solve_ms": round(self.solve_ms, 1),
            "max_unavailable": dict(sorted(self.max_unavailable.items())),
            "timing": self.timing.to_json(),
            "waves": [
                {
                    "wave": k,
                    "start_s": min(s.start_s or 0 for s in ws),
                    "end_s": max(s.end_s or 0 for s in ws),
                    "steps": len(ws),
                }
                for k, ws in sorted(waves.items())
            ],
        }


def durations(
    steps: Sequence[Step], timing: Timing, failed: Collection[str], serving: Collection[str] | None = None
) -> list[int]:
    """How long each step runs. `serving`: the workloads with an old replica at a site that did not
    fail (it still serves, whether it stops or stays); None: those the steps stop at such a site."""
    live = (
        set(serving)
        if serving is not None
        else {s.workload for s in steps if s.action == "scale_down" and not wave_model.failed_down(s, failed)}
    )
    out = []
    for s in steps:
        if s.action == "scale_up":
            out.append(timing.startup(s.site or ""))
        elif s.action == "shift_traffic":  # no old replica left alive: no traffic to watch move
            out.append(timing.traffic_step_s if s.workload in live else 0)
        else:
            out.append(0 if wave_model.failed_down(s, failed) else timing.drain_s)
    return out


def advisory_times(steps: Sequence[Step], dur: Sequence[int]) -> list[tuple[int, int]]:
    """The planner's waves one after the other, each as long as its slowest step."""
    wave_len: dict[int, int] = {}
    for s, d in zip(steps, dur, strict=True):
        wave_len[s.wave] = max(wave_len.get(s.wave, 0), d)
    start, at = {}, 0
    for w in sorted(wave_len):
        start[w] = at
        at += wave_len[w]
    return [(start[s.wave], start[s.wave] + d) for s, d in zip(steps, dur, strict=True)]


def timed(steps: Sequence[Step], times: Sequence[tuple[int, int]]) -> list[Step]:
    """Steps in start order (ties keep the planner's order), renumbered; a wave = one start time."""
    order = sorted(range(len(steps)), key=lambda i: (times[i][0], i))
    starts = sorted({t[0] for t in times})
    wave_of = {t: k + 1 for k, t in enumerate(starts)}
    # chunks of one workload and pool may now run in another order: their counts follow it
    count: dict[tuple[str, str | None], int] = {}
    for s in steps:
        count.setdefault((s.workload, s.pool), s.from_replicas)
    out = []
    for n, i in enumerate(order):
        s = steps[i]
        key = (s.workload, s.pool)
        frm = count[key]
        to = frm + s.to_replicas - s.from_replicas
        count[key] = to
        out.append(
            replace(
                s, index=n + 1, wave=wave_of[times[i][0]], from_replicas=frm, to_replicas=to,
                start_s=times[i][0], end_s=times[i][1],
            )
        )  # fmt: skip
    return out


def schedule_steps(
    steps: Sequence[Step],
    *,
    order: Sequence[str],
    depends_on: Mapping[str, Sequence[str]],
    disruption_budget: int,
    max_unavailable: Mapping[str, int],
    failed_sites: Collection[str] = (),
    serving: Collection[str] | None = None,
    timing: Timing | None = None,
    time_limit_s: float = 1.0,
    engine: str = "cp-sat",
) -> tuple[list[Step], Schedule]:
    """The steps timed; `steps` are the planner's, built with a budget no larger than any workload's.

    CP-SAT starts from the better of the advisory waves and a greedy list schedule (longest
    remaining path first); its answer is used when it is no later than the advisory waves.
    """
    timing = timing or Timing()
    failed = set(failed_sites)
    dur = durations(steps, timing, failed, serving)
    adv = advisory_times(steps, dur)
    adv_makespan = max((e for _, e in adv), default=0)
    started = time.perf_counter()
    why = "requested"
    if engine == "cp-sat" and steps:
        m = wave_model.build(steps, dur, adv, order, depends_on, disruption_budget, max_unavailable, failed)
        hint, used = m.hint, "advisory"
        fast = wave_model.greedy(m)
        if wave_model.makespan(m, fast) < wave_model.makespan(m, hint):
            hint, used = fast, "list"
        bound = wave_model.lower_bound(m)
        known = (hint, wave_model.makespan(m, hint), bound, False)
        found: tuple[list[int], int, int, bool] | None = None
        if known[1] == bound:  # nothing can finish sooner: no search needed
            found = (hint, bound, bound, True)
        else:
            found = wave_model.cpsat(m, hint, time_limit_s, bound)
            if found is None:  # CP-SAT found nothing in its time: the best schedule known
                found, why = known, "cp-sat found no schedule in its time"
            else:
                used = "cp-sat"
        solve_ms = (time.perf_counter() - started) * 1000
        if found[1] <= adv_makespan:
            starts, span, bound, optimal = found
            times: list[tuple[int, int] | None] = [
                (span, span) if wave_model.failed_down(s, failed) else None for s in steps
            ]
            for node, i in enumerate(m.kept):
                times[i] = (starts[node], starts[node] + dur[i])
            kept = [i for i, t in enumerate(times) if t is not None]
            return timed([steps[i] for i in kept], [t for t in times if t is not None]), Schedule(
                used,
                "optimal" if optimal else ("feasible" if used == "cp-sat" else why),
                span,
                bound,
                adv_makespan,
                solve_ms,
                dict(max_unavailable),
                timing,
            )
    else:
        solve_ms = (time.perf_counter() - started) * 1000
    # replicas at a failed site are gone already: their removal is bookkeeping, done last
    adv = [
        (adv_makespan, adv_makespan) if wave_model.failed_down(s, failed) else t
        for s, t in zip(steps, adv, strict=True)
    ]
    return timed(steps, adv), Schedule(
        "advisory", why, adv_makespan, 0, adv_makespan, solve_ms, dict(max_unavailable), timing
    )
