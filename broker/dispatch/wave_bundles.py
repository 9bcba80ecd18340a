"""The cluster states between two placements, one per scheduled wave (pure: no I/O).

Dispatching a placement that follows another one of the same app applies the migration plan's
waves in order: after wave k every cluster runs the replicas the plan has reached then. Each
intermediate wave lists only the clusters whose Deployments change in it; the last wave is the
placement itself (every cluster's bundle, as a dispatch without a predecessor applies it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from broker.core.domain import Assignment, Explanation
from broker.core.placement import Placement
from broker.dispatch.manifests import ClusterBundle, Target, build_bundles
from broker.dispatch.migration import MigrationPlan, Slot, slots_from_assignments, state_after


def intermediate_waves(
    old: Placement,
    new: Placement,
    plan: MigrationPlan,
    targets: Mapping[str, Sequence[Target]],
    **render: Any,
) -> list[list[ClusterBundle]]:
    """Per wave before the last, the bundles of the clusters that change in it (waves that change
    no cluster, such as traffic shifts, are left out)."""
    old_slots = slots_from_assignments(old.result.assignments)
    last_wave = plan.waves
    done_after: dict[int, int] = {}
    for n, s in enumerate(plan.steps, start=1):
        done_after[s.wave] = n
    before = _state_bundles(new, old_slots, targets, render)
    out: list[list[ClusterBundle]] = []
    for wave in range(1, last_wave):
        if wave not in done_after:
            continue
        state = _state_bundles(new, state_after(old_slots, plan.steps, done_after[wave]), targets, render)
        changed = [b for c, b in sorted(state.items()) if before.get(c) is None or before[c].replicas() != b.replicas()]
        changed += [
            ClusterBundle(c, b.namespace, b.app, b.placement_id, ())
            for c, b in sorted(before.items())
            if c not in state
        ]  # a cluster emptied in this wave: its Deployments of the app go to 0
        if changed:
            out.append(sorted(changed, key=lambda b: b.cluster))
        before = state
    return out


def _state_bundles(
    new: Placement, slots: Sequence[Slot], targets: Mapping[str, Sequence[Target]], render: Mapping[str, Any]
) -> dict[str, ClusterBundle]:
    """Every cluster's bundle for these replicas, labelled as the new placement's."""
    known = {w["name"] for w in new.request.get("workloads", [])}
    explain = {(a.workload, a.pool): a.explanation for a in new.result.assignments}
    rows = tuple(
        Assignment(
            s.workload,
            s.pool,
            s.site,
            s.replicas,
            {},
            explain.get((s.workload, s.pool), Explanation(0.0, (), None)),
        )
        for s in slots
        if s.replicas > 0 and s.workload in known and targets.get(s.site)  # unreachable sites stay as they are
    )
    state = replace(new, result=replace(new.result, assignments=rows))
    return {b.cluster: b for b in build_bundles(state, targets, **render)}
