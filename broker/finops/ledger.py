"""The savings ledger, pure: split a stored placement into cost items and aggregate them.

A stored placement is a plan that runs from its `created_at` until a newer
placement of the same tenant and name replaces it. Its cost accrues over that
interval; so does what the baseline would have cost: the placement's headline
baseline (what the user would otherwise run: the home cloud's Kubernetes packer,
or for a re-plan the placement in force), and as a second figure the greedy
per-workload scheduler that shares no node. The plan's cost is split into items
(compute per workload and pool, storage per workload and site, inter-site egress
per workload) so it can be grouped by provider, site, tenant or team; each
baseline, which is only known for the whole plan, is allocated to the items in
proportion to their cost. A baseline that is unknown (not computed for
placements stored before it existed, or it could not place the request) counts
the plan's own cost: no savings are claimed against it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from broker.core.domain import HOURS_PER_MONTH, Assignment
from broker.core.placement import Placement
from broker.solver.baselines.compare import GREEDY

GROUP_BYS: tuple[str, ...] = (
    "provider",
    "site",
    "tenant",
    "team",
    "pool",
    "name",
    "workload",
    "capacity_type",
)
NO_TEAM = "(unlabelled)"
EGRESS = "(egress)"
TEAM_LABEL = "team"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One stored placement: what it costs, what the baseline would cost, while it is current."""

    placement_id: str
    tenant: str
    name: str
    created_at: datetime
    superseded_at: datetime | None
    cost_per_hour: float
    baseline_cost_per_hour: float  # the headline baseline; equals cost_per_hour when unknown
    has_baseline: bool
    # kubernetes-packer | placement-in-force; None: not computed (stored before it existed)
    baseline_policy: str | None = None
    greedy_cost_per_hour: float | None = None  # the greedy-cheapest-fit figure; None: unknown

    @property
    def greedy_or_cost(self) -> float:
        return self.greedy_cost_per_hour if self.greedy_cost_per_hour is not None else self.cost_per_hour

    @property
    def savings_per_hour(self) -> float:
        return self.baseline_cost_per_hour - self.cost_per_hour

    @property
    def savings_per_month(self) -> float:
        return self.savings_per_hour * HOURS_PER_MONTH

    def active_hours(self, start: datetime, end: datetime) -> float:
        """Hours of [start, end) during which this placement was the current one."""
        lo = max(start, self.created_at)
        hi = min(end, self.superseded_at) if self.superseded_at is not None else end
        return max(0.0, (hi - lo).total_seconds() / 3600.0)

    def active_at(self, t: datetime) -> bool:
        return self.created_at <= t and (self.superseded_at is None or t < self.superseded_at)


@dataclass(frozen=True, slots=True)
class LedgerItem:
    placement_id: str
    line: int
    kind: str  # compute | storage | egress
    workload: str
    team: str
    provider: str
    site: str | None
    pool: str | None
    quantity: float  # compute: nodes of the pool in the whole plan; storage: GiB
    unit_price_per_hour: float  # price of one node (compute items)
    # the public on-demand list price of the same node type (before negotiated discounts), where known
    list_unit_price_per_hour: float
    cost_per_hour: float
    baseline_cost_per_hour: float
    greedy_cost_per_hour: float  # the greedy baseline's share (the item's cost when unknown)
    # the same node on demand at the tenant's negotiated price (what a commitment is measured against);
    # None on items recorded before it was kept
    contracted_unit_price_per_hour: float | None = None

    @property
    def capacity_type(self) -> str:
        return self.pool.rsplit("/", 1)[1] if self.pool else ""


def ondemand_counterpart(pool: str) -> str:
    """'aws:x/m6i.large/spot' -> 'aws:x/m6i.large/ondemand' (the list price of a discounted node)."""
    base, _cap = pool.rsplit("/", 1)
    return f"{base}/ondemand"


def entry_from_placement(p: Placement) -> LedgerEntry:
    if p.id is None or p.created_at is None:
        raise ValueError("only a stored placement has a ledger entry")
    cost = p.result.cost_per_hour
    head = p.result.baseline
    if head.policy == GREEDY:  # stored before the headline baseline existed: greedy was its only one
        base, policy, greedy = None, None, head.cost_per_hour
    else:
        base, policy = head.cost_per_hour, head.policy
        greedy = next((b.cost_per_hour for b in p.result.baselines if b.policy == GREEDY), None)
    return LedgerEntry(
        placement_id=p.id,
        tenant=p.tenant,
        name=p.name,
        created_at=p.created_at,
        superseded_at=None,
        cost_per_hour=cost,
        baseline_cost_per_hour=base if base is not None else cost,
        has_baseline=base is not None,
        baseline_policy=policy,
        greedy_cost_per_hour=greedy,
    )


def workload_teams(request: Mapping[str, Any]) -> dict[str, str | None]:
    """The team of each workload of a request document, by name: its `labels.team` when set, else
    the request's `team` (the budget scope, placement-api extensions); None: neither says one.
    The one rule the savings ledger (its `team` group, the FOCUS tag) and the budgets share."""
    default = request.get("team") or None
    return {
        str(w["name"]): str((w.get("labels") or {}).get(TEAM_LABEL) or default or "") or None
        for w in request.get("workloads", [])
    }


def _teams(request: Mapping[str, Any]) -> dict[str, str]:
    return {w: team or NO_TEAM for w, team in workload_teams(request).items()}


def team_costs(placement: Placement) -> dict[str | None, float]:
    """The placement's cost per hour split by team (`workload_teams`; None: no team), as the
    ledger splits it into items (compute, storage, egress per workload); the parts add up to its
    cost_per_hour."""
    teams = workload_teams(placement.request)
    raw = _raw_items(placement, lambda _pool: None, lambda _pool: None)
    total = sum(r["cost"] for r in raw)
    cost = placement.result.cost_per_hour
    if total <= 0:  # nothing to split by: the whole plan is its workloads' one team, if they share it
        shared = set(teams.values())
        return {next(iter(shared)) if len(shared) == 1 else None: cost}
    out: dict[str | None, float] = defaultdict(float)
    for r in raw:
        out[teams.get(str(r["workload"]))] += r["cost"] * cost / total
    return dict(out)


def _compute_share(a: Assignment) -> float:
    br = a.explanation.cost_breakdown
    return float(br.get("compute", a.explanation.cost_per_hour - br.get("storage", 0.0)))


def _raw_items(
    placement: Placement,
    list_price: Callable[[str], float | None],
    contracted_price: Callable[[str], float | None],
) -> list[dict[str, Any]]:
    """The placement's cost split into compute, storage and egress parts per workload."""
    gib = {str(w["name"]): float(w.get("storage_gib") or 0.0) for w in placement.request.get("workloads", [])}
    nodes = {n.pool: (n.count, n.cost_per_hour) for n in placement.result.nodes}
    assignments = placement.result.assignments

    # the node cost of a pool, split by each workload's share as the explanation computed it
    share_sum: dict[str, float] = defaultdict(float)
    users: dict[str, int] = defaultdict(int)
    for a in assignments:
        share_sum[a.pool] += _compute_share(a)
        users[a.pool] += 1
    raw: list[dict[str, Any]] = []
    for a in assignments:
        count, pool_cost = nodes.get(a.pool, (0, 0.0))
        total = share_sum[a.pool]
        portion = _compute_share(a) / total if total > 0 else 1.0 / users[a.pool]
        unit = pool_cost / count if count else 0.0
        listed = list_price(a.pool)
        contracted = contracted_price(a.pool)
        raw.append(
            dict(
                kind="compute",
                workload=a.workload,
                site=a.site,
                pool=a.pool,
                qty=count,
                unit=unit,
                list_unit=listed if listed is not None else unit,
                contracted_unit=contracted,
                cost=pool_cost * portion,
            )
        )
        storage = float(a.explanation.cost_breakdown.get("storage", 0.0))
        if storage > 0:
            raw.append(
                dict(
                    kind="storage",
                    workload=a.workload,
                    site=a.site,
                    pool=None,
                    qty=gib.get(a.workload, 0.0) * a.replicas,
                    unit=0.0,
                    list_unit=0.0,
                    cost=storage,
                )
            )
    egress = placement.result.egress_cost_per_hour
    if egress > 0:
        per_w: dict[str, float] = defaultdict(float)
        for r in raw:
            per_w[r["workload"]] += r["cost"]
        total_w = sum(per_w.values())
        for w, c in per_w.items():
            share = c / total_w if total_w > 0 else 1.0 / len(per_w)
            raw.append(
                dict(
                    kind="egress",
                    workload=w,
                    site=None,
                    pool=None,
                    qty=0.0,
                    unit=0.0,
                    list_unit=0.0,
                    cost=egress * share,
                )
            )
    return raw


def items_from_placement(
    entry: LedgerEntry,
    placement: Placement,
    list_price: Callable[[str], float | None] = lambda _pool: None,
    contracted_price: Callable[[str], float | None] = lambda _pool: None,
) -> list[LedgerItem]:
    """Split a placement into items whose costs add up to its cost_per_hour. `list_price(pool)`:
    the public on-demand list price of the pool's node type; `contracted_price(pool)`: the same
    node on demand at the negotiated price (discount rules applied)."""
    teams = _teams(placement.request)
    raw = _raw_items(placement, list_price, contracted_price)
    plan_cost = sum(r["cost"] for r in raw)
    ratio = entry.baseline_cost_per_hour / plan_cost if plan_cost > 0 else 0.0
    greedy_ratio = entry.greedy_or_cost / plan_cost if plan_cost > 0 else 0.0
    return [
        LedgerItem(
            placement_id=entry.placement_id,
            line=i,
            kind=r["kind"],
            workload=str(r["workload"]),
            team=teams.get(str(r["workload"]), NO_TEAM),
            provider=str(r["site"]).split(":", 1)[0] if r["site"] else EGRESS,
            site=r["site"],
            pool=r["pool"],
            quantity=float(r["qty"]),
            unit_price_per_hour=float(r["unit"]),
            list_unit_price_per_hour=float(r["list_unit"]),
            cost_per_hour=float(r["cost"]),
            baseline_cost_per_hour=float(r["cost"]) * ratio,
            greedy_cost_per_hour=float(r["cost"]) * greedy_ratio,
            contracted_unit_price_per_hour=r.get("contracted_unit"),
        )
        for i, r in enumerate(raw)
    ]


# ---- aggregation ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figures:
    """A group's (or the total's) run-rate at the window's end and its cost accrued over the window."""

    placements: int
    cost_per_hour: float
    baseline_cost_per_hour: float
    cost: float  # accrued over the window, USD
    baseline_cost: float
    greedy_cost_per_hour: float = 0.0  # the second figure: the greedy baseline's run-rate and accrual
    greedy_cost: float = 0.0
    without_baseline: int = 0  # placements whose headline baseline is unknown (no savings claimed)
    # placements per headline baseline policy: a total may mix them (a re-plan's is the placement
    # in force; the largest requests' the home-cloud packer), so a label names them all
    baseline_policies: dict[str, int] = field(default_factory=dict)

    @property
    def savings_per_hour(self) -> float:
        return self.baseline_cost_per_hour - self.cost_per_hour

    @property
    def savings(self) -> float:
        return self.baseline_cost - self.cost


@dataclass(frozen=True, slots=True)
class GroupFigures:
    key: str
    figures: Figures


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    start: datetime
    cost: float
    baseline_cost: float
    greedy_cost: float = 0.0


@dataclass
class Totals:
    """The accumulator behind Figures."""

    placements: set[str]
    cost_per_hour: float = 0.0
    baseline_cost_per_hour: float = 0.0
    cost: float = 0.0
    baseline_cost: float = 0.0
    greedy_cost_per_hour: float = 0.0
    greedy_cost: float = 0.0
    without_baseline: set[str] = field(default_factory=set)
    policy_of: dict[str, str] = field(default_factory=dict)  # placement -> its headline baseline policy

    def figures(self) -> Figures:
        n = len(self.placements)
        return Figures(
            n,
            self.cost_per_hour,
            self.baseline_cost_per_hour,
            self.cost,
            self.baseline_cost,
            self.greedy_cost_per_hour,
            self.greedy_cost,
            len(self.without_baseline),
            dict(sorted(Counter(self.policy_of.values()).items())),
        )


def group_key(item: LedgerItem, entry: LedgerEntry, group_by: str) -> str:
    if group_by == "tenant":
        return entry.tenant
    if group_by == "name":
        return entry.name
    if group_by == "capacity_type":
        return item.capacity_type or item.kind
    if group_by == "pool":
        return item.pool or (f"{item.site} ({item.kind})" if item.site else EGRESS)
    if group_by == "site":
        return item.site or EGRESS
    value: str = getattr(item, group_by)
    return value


def summarize(
    entries: Sequence[LedgerEntry],
    items: Iterable[LedgerItem],
    *,
    group_by: str,
    start: datetime,
    end: datetime,
) -> tuple[Figures, list[GroupFigures]]:
    """(totals, groups): run-rate of the placements current at `end`, and cost accrued in [start, end)."""
    totals, groups = summarize_by(entries, items, group_bys=(group_by,), start=start, end=end)
    return totals, groups[group_by]


def summarize_by(
    entries: Sequence[LedgerEntry],
    items: Iterable[LedgerItem],
    *,
    group_bys: Sequence[str],
    start: datetime,
    end: datetime,
) -> tuple[Figures, dict[str, list[GroupFigures]]]:
    """Like summarize, for several groupings in one pass over the items (the dashboard's four)."""
    by_id = {e.placement_id: e for e in entries}
    hours = {e.placement_id: e.active_hours(start, end) for e in entries}
    # the run-rate is what is current at the end of the window (just before it: [start, end) is half-open)
    at = end - timedelta(microseconds=1)
    current = {e.placement_id for e in entries if e.active_at(at)}
    total = Totals(set())
    groups: dict[str, dict[str, Totals]] = {g: {} for g in group_bys}
    for it in items:
        e = by_id.get(it.placement_id)
        h = hours.get(it.placement_id, 0.0)
        if e is None or (h <= 0 and it.placement_id not in current):
            continue
        cost, base, greedy = it.cost_per_hour * h, it.baseline_cost_per_hour * h, it.greedy_cost_per_hour * h
        now = it.placement_id in current
        targets = [total, *(groups[g].setdefault(group_key(it, e, g), Totals(set())) for g in group_bys)]
        for t in targets:
            t.placements.add(it.placement_id)
            if not e.has_baseline:
                t.without_baseline.add(it.placement_id)
            elif e.baseline_policy is not None:
                t.policy_of[it.placement_id] = e.baseline_policy
            t.cost += cost
            t.baseline_cost += base
            t.greedy_cost += greedy
            if now:
                t.cost_per_hour += it.cost_per_hour
                t.baseline_cost_per_hour += it.baseline_cost_per_hour
                t.greedy_cost_per_hour += it.greedy_cost_per_hour
    out: dict[str, list[GroupFigures]] = {}
    for g, by_key in groups.items():
        rows = [GroupFigures(k, v.figures()) for k, v in by_key.items()]
        # by the figures as reported (cents of a cent): groups that read the same sort by name
        rows.sort(key=lambda r: (-round(r.figures.cost, 4), -round(r.figures.cost_per_hour, 6), r.key))
        out[g] = rows
    return total.figures(), out


def series(entries: Sequence[LedgerEntry], *, start: datetime, end: datetime, step: timedelta) -> list[SeriesPoint]:
    """Accrued cost and baseline per time bucket of [start, end).

    Each placement visits only the buckets it overlaps, so the cost is
    O(placements + buckets) for the usual short-lived CI placements.
    """
    n = max(1, -(-int((end - start) / timedelta(microseconds=1)) // int(step / timedelta(microseconds=1))))
    cost = [0.0] * n
    base = [0.0] * n
    greedy = [0.0] * n
    for e in entries:
        lo = max(start, e.created_at)
        hi = min(end, e.superseded_at) if e.superseded_at is not None else end
        if hi <= lo:
            continue
        b = int((lo - start) / step)
        while b < n:
            b_start = start + b * step
            if b_start >= hi:
                break
            h = e.active_hours(b_start, min(b_start + step, end))
            cost[b] += e.cost_per_hour * h
            base[b] += e.baseline_cost_per_hour * h
            greedy[b] += e.greedy_or_cost * h
            b += 1
    return [SeriesPoint(start + b * step, cost[b], base[b], greedy[b]) for b in range(n)]
