"""Monthly budgets per tenant (and optionally per team), enforced at placement time.

What counts against a budget is the committed run rate: for every placement name
of the tenant, the latest stored placement's cost_per_hour x 730 h. Placing a
name again replaces its previous commitment, so a CI pipeline re-placing the
same service is charged once, not once per run. A team's budget counts the part of
each placement its workloads cost (a workload's team: its `labels.team`, else the
request's `team`; `broker.finops.ledger.workload_teams`, as the savings ledger groups it).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from broker.core.domain import HOURS_PER_MONTH
from broker.core.placement import BudgetFigure
from broker.db.service_models import BudgetRow, CommitmentRow
from broker.db.session import transaction
from broker.errors import InvalidRequest, NotFound, OverBudget
from broker.observability import OVER_BUDGET
from broker.placements.request_documents import PlacementRequestIn

TENANT_WIDE = ""


class Budgets:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def set(self, *, tenant: str, monthly_usd: float, team: str = TENANT_WIDE) -> dict[str, Any]:
        if not monthly_usd >= 0 or monthly_usd > 1e12:
            raise InvalidRequest(
                "the budget must be a non-negative amount",
                errors=[{"loc": ["body", "monthly_usd"], "msg": "must be >= 0"}],
            )
        with transaction(self._sessions) as s:
            row = s.scalar(select(BudgetRow).where(BudgetRow.tenant == tenant, BudgetRow.team == team))
            if row is None:
                row = BudgetRow(tenant=tenant, team=team, monthly_usd=monthly_usd)
                s.add(row)
            row.monthly_usd = float(monthly_usd)
            row.updated_at = datetime.now(UTC)
            s.flush()
            return _figures(s, row, exclude_name=None, adding=0.0)

    def delete(self, *, tenant: str, team: str = TENANT_WIDE) -> None:
        with transaction(self._sessions) as s:
            gone = s.execute(delete(BudgetRow).where(BudgetRow.tenant == tenant, BudgetRow.team == team))
            if getattr(gone, "rowcount", 0) == 0:
                raise NotFound(f"no budget for team {team!r}" if team else "the tenant has no budget")

    def report(self, *, tenant: str) -> dict[str, Any]:
        """Every budget of the tenant with what is used, and the tenant's total committed run rate."""
        with self._sessions() as s:
            rows = s.scalars(select(BudgetRow).where(BudgetRow.tenant == tenant).order_by(BudgetRow.team))
            budgets = [_figures(s, r, exclude_name=None, adding=0.0) for r in rows]
            total = _used(s, tenant, None, exclude_name=None)
        return {"tenant": tenant, "committed_per_month": round(total, 2), "budgets": budgets}

    def check(
        self,
        s: Session,
        *,
        tenant: str,
        req: PlacementRequestIn,
        cost_per_hour: float,
        team_costs: Mapping[str | None, float] | None = None,
    ) -> tuple[BudgetFigure, ...] | None:
        """Budget figures for this placement (None without budgets); OverBudget when one is exceeded.
        `team_costs`: its cost per hour by team (`broker.finops.ledger.team_costs`); None: all of
        it the request's `team`'s.

        Locks the budget rows (SELECT ... FOR UPDATE where the database has it) so two
        concurrent placements of one tenant cannot both squeeze under the same budget.
        """
        name = req.name
        shares = _monthly(team_costs if team_costs is not None else {req.team: cost_per_hour})
        teams = [TENANT_WIDE, *sorted(shares)]
        rows = s.scalars(
            select(BudgetRow).where(BudgetRow.tenant == tenant, BudgetRow.team.in_(teams)).with_for_update()
        ).all()
        adding = cost_per_hour * HOURS_PER_MONTH
        figures = [
            _figures(s, r, exclude_name=name, adding=shares.get(r.team, 0.0) if r.team else adding) for r in rows
        ]
        over = [f for f in figures if f["over"]]
        if over and not req.allow_over_budget:
            OVER_BUDGET.inc()
            f = over[0]
            scope = f"team {f['team']!r}" if f["team"] else f"tenant {tenant!r}"
            raise OverBudget(
                f"this placement adds {f['this_placement']:.2f} USD/month; {scope} would commit "
                f"{f['projected']:.2f} of its {f['monthly_usd']:.2f} USD monthly budget "
                '(set "allow_over_budget": true to place it anyway)',
                budget=f,
                budgets=figures,
            )
        return tuple(BudgetFigure(**f) for f in figures) or None

    def commit(
        self,
        s: Session,
        *,
        tenant: str,
        req: PlacementRequestIn,
        pid: str,
        cost_per_hour: float,
        scarce_nodes: dict[str, int],
        team_costs: Mapping[str | None, float] | None = None,
    ) -> None:
        row = s.get(CommitmentRow, (tenant, req.name))
        if row is None:
            row = CommitmentRow(tenant=tenant, name=req.name)
            s.add(row)
        row.team = req.team or TENANT_WIDE
        row.placement_id = pid
        row.cost_per_month = cost_per_hour * HOURS_PER_MONTH
        row.team_costs = _monthly(team_costs if team_costs is not None else {req.team: cost_per_hour})
        row.scarce_nodes = scarce_nodes
        row.updated_at = datetime.now(UTC)


def _monthly(per_hour: Mapping[str | None, float]) -> dict[str, float]:
    """USD per month by team, the parts without a team left out (the tenant-wide budget counts them)."""
    return {t: c * HOURS_PER_MONTH for t, c in per_hour.items() if t}


def _used(s: Session, tenant: str, team: str | None, *, exclude_name: str | None) -> float:
    if not team:  # the tenant's whole committed run rate
        q = select(func.coalesce(func.sum(CommitmentRow.cost_per_month), 0.0)).where(CommitmentRow.tenant == tenant)
        if exclude_name is not None:
            q = q.where(CommitmentRow.name != exclude_name)
        return float(s.scalar(q) or 0.0)
    # a team's part of each commitment (one row per placement name of the tenant)
    q2 = select(CommitmentRow.team_costs).where(CommitmentRow.tenant == tenant)
    if exclude_name is not None:
        q2 = q2.where(CommitmentRow.name != exclude_name)
    return float(sum(float((parts or {}).get(team, 0.0)) for parts in s.scalars(q2)))


def _figures(s: Session, row: BudgetRow, *, exclude_name: str | None, adding: float) -> dict[str, Any]:
    used = _used(s, row.tenant, row.team or None, exclude_name=exclude_name)
    projected = used + adding
    return {
        "team": row.team or None,
        "monthly_usd": round(row.monthly_usd, 2),
        "used": round(used, 2),
        "this_placement": round(adding, 2),
        "projected": round(projected, 2),
        "remaining": round(row.monthly_usd - projected, 2),
        "over": projected > row.monthly_usd + 1e-9,
    }
