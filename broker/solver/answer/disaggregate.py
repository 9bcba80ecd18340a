"""Deal a class's replicas back to its member workloads (see classes.py for why it is exact)."""

from __future__ import annotations

from collections.abc import Sequence

from broker.solver.prepare.classes import SPOT, WorkloadClass, WorkloadData, spot_cap
from broker.solver.types import ClassPlacement, Placement


def disaggregate(
    classes: Sequence[WorkloadClass],
    workloads: Sequence[WorkloadData],
    x: ClassPlacement,
    *,
    site_of: Sequence[int],
    cap_of: Sequence[int],
) -> Placement:
    by_class: dict[int, list[tuple[int, int]]] = {}
    for (c, p), r in sorted(x.items()):
        by_class.setdefault(c, []).append((p, r))
    out: Placement = {}
    for c, rows in by_class.items():
        cl = classes[c]
        if cl.size == 1:
            for p, r in rows:
                out[(cl.members[0], p)] = r
            continue
        if cl.min_sites > 1:
            # big sites first, then round-robin: every member meets each site holding
            # >= K replicas, and the smaller ones cover members evenly (floor(L/K) each)
            per_site: dict[int, int] = {}
            for p, r in rows:
                per_site[site_of[p]] = per_site.get(site_of[p], 0) + r
            ranked = sorted(rows, key=lambda pr: (-per_site[site_of[pr[0]]], site_of[pr[0]], pr[0]))
            seq = [p for p, r in ranked for _ in range(r)]
            for i, p in enumerate(seq):
                key = (cl.members[i % cl.size], p)
                out[key] = out.get(key, 0) + 1
            continue
        need = {m: workloads[m].w.replicas for m in cl.members}
        caps = {m: spot_cap(workloads[m].w) for m in cl.members}
        # spot replicas first, each member up to its own cap; then the rest in contiguous blocks
        ordered = sorted(rows, key=lambda pr: (cap_of[pr[0]] != SPOT, pr[0]))
        for p, r in ordered:
            left = r
            is_spot = cap_of[p] == SPOT
            for m in cl.members:
                if left == 0:
                    break
                room = need[m]
                cap_m = caps[m]
                if is_spot and cap_m is not None:
                    room = min(room, cap_m)
                take = min(room, left)
                if take <= 0:
                    continue
                need[m] -= take
                if is_spot and cap_m is not None:
                    caps[m] = cap_m - take
                out[(m, p)] = out.get((m, p), 0) + take
                left -= take
    return out
