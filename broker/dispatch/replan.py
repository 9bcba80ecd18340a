"""Replan a stored placement when prices, capacity or demand change or a site fails.

The stored request is solved again against today's catalog (failed sites
offer no capacity, demand overrides change replica counts). The new placement
is worth moving to only when what it saves over the request's horizon pays for
the moves (`migration_cost_per_replica` per replica that changes pool); a
failed site or changed demand forces the move. Either way the answer carries
the migration plan and its rollback.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from broker.app import Broker, parse_request
from broker.core.domain import Assignment, PlacementResult
from broker.core.placement import Placement
from broker.db.dispatch_models import ReplanRow
from broker.db.session import transaction
from broker.dispatch.alerts import SITE_DOWN, AlertmanagerWebhook, triggers
from broker.dispatch.clusters import list_clusters
from broker.dispatch.documents import ReplanIn
from broker.dispatch.migration import (
    MigrationPlan,
    plan_migration,
    resolve_max_unavailable,
    slots_from_assignments,
)
from broker.errors import BrokerError, InvalidRequest, NotFound
from broker.ids import new_replan_id
from broker.placements.documents import placement_document
from broker.placements.store import PlacementStore

MIGRATE, KEEP, UNCHANGED = "migrate", "keep", "unchanged"
# kept of a re-plan's time limit for what follows its solve (after_solve_s): the placement's own
# storing, the migration plan and its schedule, the replan's row; per replica, as they grow.
# Sized for a loaded host (bench/RESULTS.md, the drill): the solve also overruns its limit a little
AFTER_SOLVE_S = 0.15
AFTER_SOLVE_S_PER_REPLICA = 5.0e-4


def current_by_pool(assignments: Iterable[Assignment]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for a in assignments:
        per = out.setdefault(a.pool, {})
        per[a.workload] = per.get(a.workload, 0) + a.replicas
    return out


class ReplanService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.placements = PlacementStore(broker.sessions)

    def _check(self, old: Placement, doc: ReplanIn) -> None:
        cat = self.broker.catalog()
        names = {w["name"] for w in old.request.get("workloads", [])}
        errors = [
            {"loc": ["body", "exclude_sites", i], "msg": f"unknown site {site!r}"}
            for i, site in enumerate(doc.exclude_sites)
            if site not in cat.sites
        ] + [
            {"loc": ["body", "replicas", w], "msg": f"no workload {w!r} in the placement"}
            for w in doc.replicas
            if w not in names
        ]
        if errors:
            raise InvalidRequest("the replan request is invalid", errors=errors)

    def old_cost_now(self, result: PlacementResult) -> tuple[float, list[str]]:
        """The stored plan's node cost at today's prices, and the pools that no longer exist."""
        table = self.broker.catalog().table
        cost, gone = 0.0, []
        for n in result.nodes:
            i = table.pool_index.get(n.pool)
            if i is None:
                gone.append(n.pool)
                cost += n.cost_per_hour
            else:
                cost += n.count * float(table.price[i])
        cost += result.egress_cost_per_hour + result.storage_cost_per_hour
        return cost, gone

    def replan(self, placement_id: str, doc: ReplanIn, *, tenant: str = "default") -> dict[str, Any]:
        started = time.perf_counter()
        old = self.placements.get(placement_id, tenant=tenant)
        self._check(old, doc)
        old_assignments = old.result.assignments
        request = dict(old.request)
        request["workloads"] = [
            {**w, "replicas": doc.replicas.get(w["name"], w["replicas"])} for w in request.get("workloads", [])
        ]
        forced: list[str] = []
        on_failed = sorted({a.site for a in old_assignments if a.site in doc.exclude_sites})
        if on_failed:
            forced.append(f"replicas run at failed site(s) {on_failed}")
        changed = {w: n for w, n in doc.replicas.items() if n != _replicas(old.request, w)}
        if changed:
            forced.append(f"demand changed: {changed}")
        old_now, gone = self.old_cost_now(old.result)
        if gone:
            forced.append(f"pool(s) no longer offered: {gone}")

        req_in = parse_request({**request, "dry_run": doc.dry_run})
        # the request's time limit is the whole re-plan's: what the solve gets is what is left
        # of it once the placement is loaded, less what the migration plan and storing take
        budget_s = self.broker.time_budget(req_in, synchronous=True).seconds
        replicas = sum(int(w["replicas"]) for w in request["workloads"])
        solve_s = budget_s - (time.perf_counter() - started) - after_solve_s(replicas, budget_s)
        deps = {w["name"]: [d["workload"] for d in w.get("depends_on", [])] for w in request["workloads"]}
        caps = {
            w["name"]: resolve_max_unavailable(w.get("max_unavailable"), int(w["replicas"]), doc.disruption_budget)
            for w in request["workloads"]
        }
        horizon = float(request.get("horizon_hours", 730.0))
        assessed: list[tuple[MigrationPlan, str]] = []

        def assess(new: Placement) -> bool:
            """The migration plan to `new` and the decision; stored only when it migrates, so a
            move that pays is solved once, not solved as a dry run and again to store it."""
            plan = plan_migration(
                slots_from_assignments(old_assignments),
                slots_from_assignments(new.result.assignments),
                depends_on=deps,
                disruption_budget=doc.disruption_budget,
                traffic_steps=doc.traffic_steps,
                cost_per_moved_replica=doc.migration_cost_per_replica,
                max_unavailable=caps,
                failed_sites=doc.exclude_sites,
            )
            decision = decide(plan, forced=bool(forced), savings=old_now - new.result.cost_per_hour, horizon=horizon)
            assessed.append((plan, decision))
            return decision == MIGRATE

        new, stored = self.broker.place(
            req_in,
            tenant=tenant,
            exclude_sites=doc.exclude_sites,
            current=current_by_pool(old_assignments),
            time_limit_s=solve_s,
            store_if=assess,
        )
        if not assessed:  # a dry run: nothing was to be stored, the plan is still the answer
            assess(new)
        plan, decision = assessed[0]
        new_cost = new.result.cost_per_hour
        savings = old_now - new_cost
        new_id = new.id if stored else None
        out = {
            "placement_id": placement_id,
            "reason": doc.reason,
            "decision": decision,
            "forced_by": forced,
            "dry_run": doc.dry_run,
            "new_placement_id": new_id,
            "old_cost_per_hour": old.result.cost_per_hour,
            "old_cost_per_hour_now": round(old_now, 6),
            "new_cost_per_hour": new_cost,
            "savings_per_hour": round(savings, 6),
            "horizon_hours": horizon,
            "horizon_savings": round(savings * horizon, 2),
            "migration_cost": round(plan.migration_cost, 6),
            "payback_hours": round(plan.migration_cost / savings, 2) if savings > 0 else None,
            "nodes_before": sum(n.count for n in old.result.nodes),
            "nodes_after": sum(n.count for n in new.result.nodes),
            "excluded_sites": list(doc.exclude_sites),
            "migration": plan.to_json(),
            "new_placement": placement_document(new),
        }
        if doc.dry_run:
            return out
        rid = new_replan_id()
        out["id"] = rid
        out["created_at"] = datetime.now(UTC).isoformat()
        with transaction(self.broker.sessions) as s:
            s.add(
                ReplanRow(
                    id=rid,
                    tenant=tenant,
                    from_placement=placement_id,
                    to_placement=new_id,
                    reason=doc.reason,
                    decision=decision,
                    document=out,
                    created_at=datetime.now(UTC),
                )
            )
        return out

    def on_alerts(
        self, payload: AlertmanagerWebhook, *, tenant: str = "default", dry_run: bool = False
    ) -> dict[str, Any]:
        """Replan every placement that runs where a firing alert points."""
        cluster_sites = {c.name: c.site for c in list_clusters(self.broker.sessions, tenant=tenant)}
        found, ignored = triggers(payload, cluster_sites)
        replans: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for t in found:
            for p in self.placements.latest_by_name(tenant=tenant):
                at_site = {a.workload for a in p.result.assignments if a.site == t.site}
                if not at_site or p.id is None:
                    continue
                if t.action == SITE_DOWN:
                    doc = ReplanIn(reason="site_failure", exclude_sites=[t.site], dry_run=dry_run)
                else:
                    more = overload_replicas(p.request, at_site, t.increase_pct)
                    doc = ReplanIn(reason="node_overload", replicas=more, dry_run=dry_run)
                try:
                    out = self.replan(p.id, doc, tenant=tenant)
                except BrokerError as exc:  # one placement that cannot move must not hide the others
                    errors.append({"placement_id": p.id, "site": t.site, "error": exc.detail})
                    continue
                out.pop("new_placement", None)
                replans.append({"alert": t.alertname, "action": t.action, "site": t.site, **out})
        return {"replans": replans, "ignored": ignored, "errors": errors}

    def get(self, replan_id: str, *, tenant: str = "default") -> dict[str, Any]:
        with self.broker.sessions() as s:
            row = s.get(ReplanRow, replan_id)
            if row is None or row.tenant != tenant:
                raise NotFound(f"replan {replan_id!r} does not exist")
            return dict(row.document)


def after_solve_s(replicas: int, budget_s: float) -> float:
    """What a re-plan keeps of its time limit for after the solve: the migration plan, its wave
    schedule and storing both documents grow with the replicas; at most half the limit."""
    return min(0.5 * budget_s, AFTER_SOLVE_S + AFTER_SOLVE_S_PER_REPLICA * replicas)


def decide(plan: MigrationPlan, *, forced: bool, savings: float, horizon: float) -> str:
    """Migrate when forced or when the savings over the horizon pay for the moves."""
    if plan.added_replicas + plan.removed_replicas == 0:
        return UNCHANGED
    if forced or savings * horizon > plan.migration_cost:
        return MIGRATE
    return KEEP


def _replicas(request: Mapping[str, Any], workload: str) -> int:
    return next((int(w["replicas"]) for w in request.get("workloads", []) if w["name"] == workload), 0)


def overload_replicas(request: Mapping[str, Any], workloads: set[str], headroom_pct: float) -> dict[str, int]:
    """More replicas for the workloads on an overloaded site (demand outgrew the plan)."""
    return {
        w["name"]: math.ceil(int(w["replicas"]) * (1 + headroom_pct / 100.0))
        for w in request.get("workloads", [])
        if w["name"] in workloads
    }
