"""Per-assignment explanations: cost share, binding constraints, next best choice.

A constraint binds when dropping it alone would offer a cheaper home for the
workload; homes are compared by what a replica costs when the workload runs
alone on whole nodes of a pool (node sharing aside, what a user would pay).

The next best home is the runner-up to the chosen pool: the cheapest pool at another site
that the workload's hard constraints allow and that costs alone at least what the chosen
pool does, so `next_best_extra_per_hour` >= 0. A pool the constraints allow that costs
less alone was passed over for the plan as a whole: `preferred_over` names the cheapest
such pool, what it would save alone and why the plan preferred this one (preferred.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from broker.core.domain import Assignment, Explanation, Workload
from broker.core.pooltable import BoolArray, FloatArray, IntArray, PoolTable
from broker.solver.answer import preferred as preferred_mod
from broker.solver.answer.risk import interruption_risk_month, risk_adjusted
from broker.solver.prepare.classes import SPOT, WorkloadData, per_node_exact
from broker.solver.prepare.filters import NamedMask
from broker.solver.problem import PlacementProblem
from broker.solver.segments import group_bounds
from broker.solver.types import Placement

# costs per replica closer than this are equal (float noise of ceil(r / fit) * price / r)
_EPS = 1e-9
# constraints whose relaxation says something a user can act on
_ACTIONABLE = {"residency", "latency", "capacity_type", "provider", "arch", "gpu_model", "requirement"}

Key = tuple[object, ...]


def explain_assignments(
    problem: PlacementProblem,
    workloads: list[WorkloadData],
    masks_by_w: list[list[NamedMask]],
    x: Placement,
    nodes: dict[int, int],
    *,
    node_cost: FloatArray,
) -> tuple[Assignment, ...]:
    t = problem.table
    compute = _compute_costs(t, workloads, x, nodes)
    by_workload: dict[int, list[tuple[int, int]]] = {}
    for (k, p), r in x.items():
        by_workload.setdefault(k, []).append((p, r))
    homes = _all_homes(t, workloads, masks_by_w, by_workload, node_cost)
    on_pool: dict[int, list[str]] = {}  # pool -> names of the workloads placed on it
    for k, p in x:
        on_pool.setdefault(p, []).append(workloads[k].w.name)
    dependents: dict[str, list[str]] = {}
    for wd in workloads:
        for d in wd.w.depends_on:
            dependents.setdefault(d.workload, []).append(wd.w.name)
    storage: dict[tuple[object, ...], FloatArray] = {}
    latency_at: dict[int, dict[str, float]] = {}
    rows: list[Assignment] = []
    for k, wd in enumerate(workloads):
        w = wd.w
        home = homes[(wd.signature, w.replicas)]
        binding = list(home.binding)
        used_sites = {int(t.site_idx[p]) for p, _ in by_workload.get(k, [])}
        if w.min_sites > 1 and len(used_sites) == w.min_sites:
            binding.append(f"spread.min_sites>={w.min_sites} on {w.name}")
        skey = (w.storage_gib, w.storage_tier)
        if skey not in storage:
            storage[skey] = problem.storage_per_replica_hour(w.storage_gib, w.storage_tier)

        for p, r in sorted(by_workload.get(k, []), key=lambda pr: t.pools[pr[0]].id):
            site = int(t.site_idx[p])
            cost_compute = compute[(k, p)]
            cost_storage = r * float(storage[skey][site])
            row_binding = list(binding)
            if np.isfinite(t.max_nodes[p]) and nodes[p] >= t.max_nodes[p]:
                row_binding.append(f"capacity:{t.pools[p].id} max_nodes={int(t.max_nodes[p])}")
            best1, best2 = home.best
            j = best1 if best1 >= 0 and int(t.site_idx[best1]) != site else best2
            mine = home.frac[p]
            preferred = None
            cheaper = [q for q in (best1, j) if q >= 0 and q != p and home.frac[q] < mine - _EPS]
            if cheaper and np.isfinite(mine):
                q = min(cheaper, key=lambda q: (home.frac[q], q))
                because = preferred_mod.reasons(
                    problem,
                    w,
                    p,
                    q,
                    sharers=sorted(set(on_pool.get(p, [])) - {w.name}),
                    dependents=dependents.get(w.name, []),
                    nodes=nodes,
                    storage=storage[skey],
                )
                preferred = preferred_mod.preferred_over(problem, q, (mine - home.frac[q]) * r, because)
                if j >= 0 and home.frac[j] < mine - _EPS:  # the runner-up costs at least what this pool does
                    j = home.at_least(mine, site)
            next_best = None
            extra = None
            if j >= 0:
                next_best = t.pools[j].id
                extra = round(max(home.cost(j) - mine, 0.0) * r, 6) if np.isfinite(mine) else None
            if site not in latency_at:
                latency_at[site] = {
                    name: round(float(rtt[site]), 1) for name, rtt in problem.user_rtt.items() if np.isfinite(rtt[site])
                }
            rows.append(
                Assignment(
                    workload=w.name,
                    pool=t.pools[p].id,
                    site=t.sites[site].id,
                    replicas=r,
                    latency_ms=dict(latency_at[site]),
                    latency_slo_margin_ms=_slo_margins(problem, w, site),
                    explanation=Explanation(
                        cost_per_hour=round(cost_compute + cost_storage, 6),
                        binding=tuple(row_binding),
                        next_best=next_best,
                        next_best_extra_per_hour=extra,
                        cost_breakdown=_breakdown(t, p, cost_compute, cost_storage),
                        preferred_over=preferred,
                    ),
                )
            )
    return tuple(rows)


def _slo_margins(problem: PlacementProblem, w: Workload, site: int) -> dict[str, float]:
    """How far under each of the workload's latency SLOs the site is (ms; >= 0 when placed)."""
    out = {}
    for region, slo in w.latency_slo_ms.items():
        rtt = problem.user_rtt.get(region)
        if rtt is not None and np.isfinite(rtt[site]):
            out[region] = round(slo - float(rtt[site]), 1)
    return out


def _compute_costs(
    t: PoolTable, workloads: list[WorkloadData], x: Placement, nodes: dict[int, int]
) -> dict[tuple[int, int], float]:
    """Each (workload, pool) pair's share of the pool's node cost: its mean share of the pool's
    load over the dimensions in use (all of it on an unloaded pool)."""
    if not x:
        return {}
    k, p, r = (np.array(col, dtype=np.int64) for col in zip(*((k, p, r) for (k, p), r in x.items()), strict=True))
    demand = np.array([(wd.w.cpu, wd.w.memory_gib, wd.w.gpus) for wd in workloads], dtype=np.float64)[k]
    mine = r[:, None] * demand
    load = np.zeros((t.n_pools, 3))
    np.add.at(load, p, mine)  # pair by pair in the order of x, as the rounding depends on it
    caps = np.column_stack([t.vcpus[p], t.memory_gib[p], np.maximum(t.gpus[p], 1e-9)])
    mine /= caps
    total = load[p] / caps
    dims = total > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = mine / total
    n_dims = dims.sum(axis=1)
    # a sum of two numbers (and zeros) is the same in any order; of three, take numpy's own
    sums = np.where(dims, ratio, 0.0).sum(axis=1)
    for i in np.flatnonzero(n_dims == 3):
        sums[i] = ratio[i].sum()
    portion = np.where(n_dims > 0, sums / np.maximum(n_dims, 1), 1.0)
    node_count = np.array([nodes[q] for q in p.tolist()])
    return dict(zip(x, (portion * node_count * t.price[p]).tolist(), strict=True))


@dataclass(frozen=True)
class _Home:
    frac: dict[int, float]  # per replica cost on the pools the rows name
    # cheapest allowed pool, cheapest at another site (-1: none, or no row is at the first's site)
    best: tuple[int, int]
    binding: list[str]
    homes: _Homes
    replicas: int
    runner_up: dict[tuple[float, int], int] = field(default_factory=dict)

    def at_least(self, cost: float, not_site: int) -> int:
        """The cheapest allowed pool off site `not_site` costing at least `cost` per replica (-1: none)."""
        key = (cost, not_site)
        if key not in self.runner_up:  # rows of one key share chosen pools' costs and sites
            pool, its_cost = self.homes.first_at_least(self.replicas, cost, not_site)
            self.runner_up[key] = pool
            if pool >= 0:
                self.frac.setdefault(pool, its_cost)
        return self.runner_up[key]

    def cost(self, p: int) -> float:
        if p not in self.frac:
            self.frac.update(self.homes.frac(self.replicas, {p}))
        return self.frac[p]


def _all_homes(
    t: PoolTable,
    workloads: list[WorkloadData],
    masks_by_w: list[list[NamedMask]],
    by_workload: dict[int, list[tuple[int, int]]],
    node_cost: FloatArray,
) -> dict[Key, _Home]:
    """Homes per (signature, replica count): equal keys give equal answers, computed from the
    key's first workload. Work shared by a workload size is done once per size, work shared by
    a candidate set once per signature; one size at a time, as each is as large as the table."""
    first: dict[Key, dict[Key, dict[int, int]]] = {}  # size -> signature -> replicas -> workload
    wanted: dict[Key, set[int]] = {}  # pools the rows of a key name
    for k, wd in enumerate(workloads):
        w, masks = wd.w, masks_by_w[k]
        # with requirements dominated pools are homes too (_Sized): another size key
        size = (w.cpu, w.memory_gib, w.gpus, bool(masks) and masks[0].reason == "size", bool(w.requirements))
        first.setdefault(size, {}).setdefault(wd.signature, {}).setdefault(w.replicas, k)
        wanted.setdefault((wd.signature, w.replicas), set()).update(p for p, _ in by_workload.get(k, []))
    by_cost = np.argsort(node_cost, kind="stable")
    out: dict[Key, _Home] = {}
    for by_sig in first.values():
        k = next(iter(next(iter(by_sig.values())).values()))
        most = max(r for rs in by_sig.values() for r in rs)
        sized = _Sized(t, workloads[k].w, masks_by_w[k], node_cost, by_cost, most)
        for sig, by_r in by_sig.items():
            homes = _Homes(sized, masks_by_w[next(iter(by_r.values()))])
            for r in by_r:
                out[(sig, r)] = homes.for_replicas(r, wanted[(sig, r)])
    return out


class _Sized:
    """The pools a replica of one size fits that no other pool dominates (only those can be a
    home), with replicas per node (fit) and node cost. For r replicas a pool costs
    ceil(r / fit) * node cost / r per replica. Pools are grouped by fit, capped at the largest r
    asked for (pools holding that many replicas all need one node), and ordered by node cost
    within a group (ties by index, NaN last): a group's cost is monotone in the node cost, so
    its first allowed pool is its cheapest home, for any replica count."""

    def __init__(
        self, t: PoolTable, w: Workload, masks: list[NamedMask], node_cost: FloatArray, by_cost: IntArray, most: int
    ) -> None:
        # a workload with requirements may use dominated pools (Catalog.table_for)
        usable = np.ones(t.n_pools, dtype=bool) if w.requirements else ~t.dominated
        if masks and masks[0].reason == "size":
            usable = usable & masks[0].mask
        self.idx = np.flatnonzero(usable)
        i = self.idx
        fit = np.floor(per_node_exact(w.cpu, w.memory_gib, w.gpus, t.vcpus[i], t.memory_gib[i], t.gpus[i]) + 1e-9)
        self.fit, self.cost = fit, node_cost[self.idx]
        self.per_node = np.arange(1, most + 1, dtype=np.float64)  # fit of each group
        # the pools holding a replica in `by_cost` order (node cost, then index), stably by group
        group_of = np.full(t.n_pools, -1, dtype=np.int64)
        holds = fit >= 1
        group_of[self.idx[holds]] = np.minimum(fit[holds], most).astype(np.int64) - 1
        ranked = by_cost[group_of[by_cost] >= 0]
        by_group = np.argsort(group_of[ranked], kind="stable")
        self.pools = ranked[by_group]
        group = group_of[self.pools]
        self.bounds = group_bounds(group)
        self.groups = group[self.bounds[:-1]]  # the groups with pools, ascending
        self.pool_cost = node_cost[self.pools]
        self.sites = t.site_idx[self.pools]
        self.nan_at = np.flatnonzero(np.isnan(self.pool_cost))  # a min over pools with one is NaN
        self.site_idx = t.site_idx
        self._restricted: dict[int, tuple[BoolArray, BoolArray]] = {}  # keeps the mask: its id stays unique

    def restrict(self, mask: BoolArray) -> BoolArray:
        """`mask` on `pools`. The filters share one array per distinct mask between candidate
        sets (filters.MaskCache), so each is gathered once per size."""
        key = id(mask)
        if key not in self._restricted:
            self._restricted[key] = (mask, mask[self.pools])
        return self._restricted[key][1]


class _Homes:
    """One candidate set's homes: the cheapest allowed pool and the cheapest at another site
    (next best homes), and the actionable constraints whose removal alone would offer a cheaper
    home, for any replica count up to the size's largest."""

    def __init__(self, sized: _Sized, masks: list[NamedMask]) -> None:
        self.sized = s = sized
        sub = [s.restrict(m.mask) for m in masks]
        ok = np.ones(len(s.pools), dtype=bool)
        for part in sub:
            ok &= part
        at, lo, hi = _spans(ok, s.bounds)
        # a relaxation allows more pools, so its cheapest in a group is no later than the first
        # allowed one: look at each group up to there (a small part of the table)
        stop = np.where(lo < hi, at[np.minimum(lo, len(at) - 1)] if len(at) else 0, s.bounds[1:] - 1)
        prefix, pre_bounds = _heads(s.bounds[:-1], stop + 1)
        actionable = [i for i, m in enumerate(masks) if m.reason in _ACTIONABLE]
        self.labels = [masks[i].label for i in actionable]
        # the constraints on those pools, then on the NaN ones (which make a min NaN)
        look = np.concatenate([prefix, s.nan_at])
        failed = ~np.array([part[look] for part in sub]).reshape(len(sub), len(look))
        fails = failed.sum(axis=0)
        # rows: the pools every constraint allows, then those only actionable constraint i rejects
        allow = np.vstack([fails == 0, fails == failed[actionable]])
        n = len(prefix)
        first = np.minimum.reduceat(np.where(allow[:, :n], np.arange(n), n), pre_bounds[:-1], axis=1)
        # per row and group the cheapest node cost allowed: the first allowed pool's
        self.by_group = np.full((len(allow), len(s.per_node)), np.inf)
        self.by_group[:, s.groups] = np.append(s.pool_cost[prefix], np.inf)[first]
        self.by_group[allow[:, n:].any(axis=1)] = np.nan
        # next best homes come from the allowed pools of finite cost: per group the first
        # (cheapest) one, and the first at a site other than that one's
        self.home = at[np.isfinite(s.pool_cost[at])]
        lo, hi = np.searchsorted(self.home, s.bounds[:-1]), np.searchsorted(self.home, s.bounds[1:])
        has = lo < hi
        self.end = np.zeros(len(s.per_node), dtype=np.int64)  # per group: where it ends in `home`
        self.end[s.groups] = hi
        self.begin = np.zeros(len(s.per_node), dtype=np.int64)  # and where it starts
        self.begin[s.groups] = lo
        self.home_key: NDArray[np.complex128] | None = None  # (group, node cost) of `home`, on demand
        self.first = self._per_group(lo[has], s.groups[has])
        self.best_site = np.full(len(s.per_node), -1)
        self.best_site[s.groups[has]] = s.sites[self.home[lo[has]]]
        away = np.flatnonzero(s.sites[self.home] != np.repeat(self.best_site[s.groups], hi - lo))
        first_away = np.searchsorted(away, lo)
        has_away = first_away < np.searchsorted(away, hi)
        self.away = self._per_group(away[first_away[has_away]], s.groups[has_away])

    def _per_group(self, at: IntArray, groups: IntArray) -> tuple[IntArray, FloatArray]:
        """Per group, a pool as an index into `home` (-1: none) and its node cost (inf: none)."""
        start = np.full(len(self.sized.per_node), -1)
        start[groups] = at
        cost = np.full(len(self.sized.per_node), np.inf)
        cost[groups] = self.sized.pool_cost[self.home[at]]
        return start, cost

    def for_replicas(self, r: int, wanted: set[int]) -> _Home:
        s = self.sized
        nodes = np.ceil(r / s.per_node)
        cheapest = (nodes * self.by_group / r).min(axis=1).tolist()
        binding = [label for label, c in zip(self.labels, cheapest[1:], strict=True) if c < cheapest[0] - 1e-9]
        best1, best2 = self._first_cheapest(nodes, r, self.first, -1), -1
        s1 = int(s.site_idx[best1]) if best1 >= 0 else -1
        if s1 >= 0 and any(s.site_idx[p] == s1 for p in wanted):  # only rows at its site need it
            near = self.best_site == s1
            start = np.where(near, self.away[0], self.first[0]), np.where(near, self.away[1], self.first[1])
            best2 = self._first_cheapest(nodes, r, start, s1)
        return _Home(self.frac(r, wanted | ({best1, best2} - {-1})), (best1, best2), binding, self, r)

    def first_at_least(self, r: int, cost: float, not_site: int) -> tuple[int, float]:
        """The cheapest allowed pool off site `not_site` whose cost per replica for r replicas is
        at least `cost`, and that cost ((-1, inf): none); lowest index on ties."""
        s = self.sized
        if self.home_key is None:  # built for the few candidate sets whose rows need a runner-up
            group_of_home = s.groups[np.searchsorted(s.bounds, self.home, side="right") - 1]
            self.home_key = group_of_home + 1j * s.pool_cost[self.home]
        groups = np.flatnonzero(self.begin < self.end)
        nodes = np.ceil(r / s.per_node[groups])
        # per group, the first allowed pool costly enough: one search over (group, node cost)
        # keys, ordered as `home` is (complex numbers compare by real part, then imaginary)
        at = np.searchsorted(self.home_key, groups + 1j * ((cost - _EPS) * r / nodes))
        has = at < self.end[groups]
        groups, nodes, at = groups[has], nodes[has], at[has]
        here = s.sites[self.home[at]] == not_site
        for i in np.flatnonzero(here).tolist():  # at the excluded site: the next one elsewhere
            k, end = int(at[i]), int(self.end[groups[i]])
            while k < end and s.sites[self.home[k]] == not_site:
                k += 1
            at[i] = k
        off = at < self.end[groups]
        if not off.any():
            return -1, np.inf
        nodes, pools = nodes[off], self.home[at[off]]
        c = nodes * s.pool_cost[pools] / r
        low = c.min()
        return int(s.pools[pools][c == low].min()), float(low)

    def _first_cheapest(self, nodes: FloatArray, r: int, start: tuple[IntArray, FloatArray], not_site: int) -> int:
        """The pool of lowest index among the cheapest allowed ones off site `not_site` (-1: none),
        given per group the first (cheapest) such pool and its node cost."""
        s = self.sized
        per_group = nodes * start[1] / r
        low = per_group.min()
        if not np.isfinite(low):
            return -1
        best = -1
        for g in np.flatnonzero(per_group == low).tolist():
            # the group's pools tied at `low` follow its first one (a cost rounds the same as a
            # slightly higher one at most), the lowest index among them wins; read a few at a time
            k, end = int(start[0][g]), int(self.end[g])
            while k < end:
                chunk = self.home[k : min(k + 16, end)]
                tied = nodes[g] * s.pool_cost[chunk] / r == low
                n = len(chunk) if tied.all() else int(np.argmin(tied))
                pools = s.pools[chunk[:n]][s.sites[chunk[:n]] != not_site]
                if len(pools):
                    best = int(pools.min()) if best < 0 else min(best, int(pools.min()))
                if n < len(chunk):
                    break
                k += n
        return best

    def frac(self, r: int, pools: set[int]) -> dict[int, float]:
        s = self.sized
        wanted = np.array(sorted(pools), dtype=np.int64)
        pos = np.minimum(np.searchsorted(s.idx, wanted), max(len(s.idx) - 1, 0))
        found = s.idx[pos] == wanted if len(s.idx) else np.zeros(len(wanted), dtype=bool)
        fit, cost = s.fit[pos[found]], s.cost[pos[found]]
        frac = np.full(len(wanted), np.inf)
        frac[found] = np.where(fit >= 1, np.ceil(r / np.maximum(fit, 1)) * cost / r, np.inf)
        return dict(zip(wanted.tolist(), frac.tolist(), strict=True))


def _spans(allow: BoolArray, bounds: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The positions where `allow` holds, and where each segment [bounds[i], bounds[i + 1]) of
    `allow` starts and ends in them."""
    at = np.flatnonzero(allow)
    return at, np.searchsorted(at, bounds[:-1]), np.searchsorted(at, bounds[1:])


def _heads(starts: IntArray, stops: IntArray) -> tuple[IntArray, IntArray]:
    """The positions start..stop - 1 of each segment, one after the other, and their bounds."""
    lengths = stops - starts
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return np.arange(bounds[-1]) - np.repeat(bounds[:-1] - starts, lengths), bounds


def _breakdown(t: PoolTable, p: int, compute: float, storage: float) -> dict[str, float]:
    out = {"compute": round(compute, 6), "storage": round(storage, 6)}
    if int(t.cap_idx[p]) == SPOT:
        risk = interruption_risk_month(str(t.site_provider[int(t.site_idx[p])]), float(t.raw_vcpus[p]))
        out["spot_interruption_risk_month"] = round(risk, 4)
        out["risk_adjusted_compute"] = round(risk_adjusted(compute, risk), 6)
    return out
