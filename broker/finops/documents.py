"""The savings and dashboard documents (JSON over REST, `broker finops savings --json`).

Built from the FinOps service's domain results with from_domain(); the rounding of
money (USD to 1e-6 per hour, 1e-4 accrued, cents per month) happens here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from broker.core.domain import HOURS_PER_MONTH, Site
from broker.core.placement import Placement
from broker.finops.ledger import Figures, GroupFigures, SeriesPoint
from broker.finops.service import Dashboard, PriceAge, SavingsReport
from broker.finops.store import DEMO_WARNING
from broker.solver.baselines.compare import (
    ANYWHERE,
    ANYWHERE_DESCRIPTION,
    GREEDY,
    GREEDY_DESCRIPTION,
    IN_FORCE,
    IN_FORCE_DESCRIPTION,
)
from broker.solver.baselines.home import KUBERNETES_PACKER, KUBERNETES_PACKER_DESCRIPTION

HEADLINE = (
    "the headline baseline: what the user would otherwise run, a Kubernetes-style packer over every "
    "pool the request allows (kubernetes-packer), for a re-plan the placement in force"
)


def _pct(saved: float, base: float) -> float | None:
    return round(saved / base * 100, 2) if base > 0 else None


class FiguresOut(BaseModel):
    placements: int
    cost_per_hour: float
    baseline_cost_per_hour: float = Field(
        description=f"{HEADLINE}; a placement whose baseline is unknown counts its own cost"
    )
    savings_per_hour: float = Field(description="baseline_cost_per_hour - cost_per_hour")
    savings_per_month: float
    savings_pct: float | None = Field(description="(1 - cost_per_hour / baseline_cost_per_hour) x 100")
    cost: float
    baseline_cost: float = Field(description=f"accrued in the window: {HEADLINE}")
    savings: float
    placements_without_baseline: int = Field(
        0,
        description="placements whose headline baseline is unknown (stored before it was computed, or it "
        "could not place the request): their own cost is counted as baseline, no savings claimed",
    )
    greedy_baseline_cost_per_hour: float = Field(
        0.0,
        description="second figure: the greedy-cheapest-fit baseline (each workload alone on its cheapest "
        "offer, sharing no node); a placement where it is unknown counts its own cost",
    )
    greedy_savings_per_month: float = 0.0
    greedy_savings_pct: float | None = Field(None, description="(1 - cost / greedy_baseline_cost) per hour, x 100")
    greedy_baseline_cost: float = Field(0.0, description="the greedy-cheapest-fit baseline accrued in the window")
    baseline_policies: dict[str, int] = Field(
        default_factory=dict,
        description="how many of the placements each headline baseline policy priced (kubernetes-packer; "
        "placement-in-force for a re-plan; kubernetes-packer-home-cloud for the largest requests): a total "
        "that mixes them is against each placement's own headline",
    )

    @classmethod
    def values(cls, f: Figures) -> dict[str, Any]:
        greedy_saved = f.greedy_cost_per_hour - f.cost_per_hour
        return {
            "placements_without_baseline": f.without_baseline,
            "greedy_baseline_cost_per_hour": round(f.greedy_cost_per_hour, 6),
            "greedy_savings_per_month": round(greedy_saved * HOURS_PER_MONTH, 2),
            "greedy_savings_pct": _pct(greedy_saved, f.greedy_cost_per_hour),
            "greedy_baseline_cost": round(f.greedy_cost, 4),
            "baseline_policies": f.baseline_policies,
            "placements": f.placements,
            "cost_per_hour": round(f.cost_per_hour, 6),
            "baseline_cost_per_hour": round(f.baseline_cost_per_hour, 6),
            "savings_per_hour": round(f.savings_per_hour, 6),
            "savings_per_month": round(f.savings_per_hour * HOURS_PER_MONTH, 2),
            "savings_pct": _pct(f.savings_per_hour, f.baseline_cost_per_hour),
            "cost": round(f.cost, 4),
            "baseline_cost": round(f.baseline_cost, 4),
            "savings": round(f.savings, 4),
        }

    @classmethod
    def from_domain(cls, f: Figures) -> FiguresOut:
        return cls(**cls.values(f))


class GroupOut(FiguresOut):
    key: str

    @classmethod
    def from_group(cls, g: GroupFigures) -> GroupOut:
        return cls(key=g.key, **FiguresOut.values(g.figures))


class SiteGroupOut(GroupOut):
    lat: float | None
    lon: float | None
    name: str

    @classmethod
    def from_site_group(cls, g: GroupFigures, site: Site | None) -> SiteGroupOut:
        return cls(
            key=g.key,
            **FiguresOut.values(g.figures),
            lat=site.lat if site else None,
            lon=site.lon if site else None,
            name=site.name if site else "",
        )


class BaselineNameOut(BaseModel):
    policy: str
    description: str


BASELINES = [
    BaselineNameOut(policy=ANYWHERE, description=ANYWHERE_DESCRIPTION),
    BaselineNameOut(policy=IN_FORCE, description=f"for a re-plan: {IN_FORCE_DESCRIPTION}"),
    BaselineNameOut(policy=KUBERNETES_PACKER, description=f"in `baselines`: {KUBERNETES_PACKER_DESCRIPTION}"),
    BaselineNameOut(policy=GREEDY, description=f"second figure (greedy_*): {GREEDY_DESCRIPTION}"),
]


def _baselines() -> list[BaselineNameOut]:
    return [b.model_copy() for b in BASELINES]


class SavingsOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    tenant: str | None
    group_by: str
    currency: str = "USD"
    baselines: list[BaselineNameOut] = Field(
        default_factory=_baselines,
        description="the baselines the figures compare with: baseline_* is the first (the second for a "
        "re-plan), greedy_* the last",
    )
    totals: FiguresOut
    groups: list[GroupOut]

    @classmethod
    def from_domain(cls, r: SavingsReport) -> SavingsOut:
        return cls(
            from_=r.start.isoformat(),
            to=r.end.isoformat(),
            tenant=r.tenant,
            group_by=r.group_by,
            totals=FiguresOut.from_domain(r.totals),
            groups=[GroupOut.from_group(g) for g in r.groups],
        )


class SeriesPointOut(BaseModel):
    start: str
    cost: float
    baseline_cost: float
    savings: float
    greedy_baseline_cost: float = 0.0

    @classmethod
    def from_domain(cls, p: SeriesPoint) -> SeriesPointOut:
        return cls(
            start=p.start.isoformat(),
            cost=round(p.cost, 4),
            baseline_cost=round(p.baseline_cost, 4),
            savings=round(p.baseline_cost - p.cost, 4),
            greedy_baseline_cost=round(p.greedy_cost, 4),
        )


class SeriesOut(BaseModel):
    step_hours: float
    points: list[SeriesPointOut]


class LatestAssignmentOut(BaseModel):
    workload: str
    pool: str
    replicas: int
    binding: list[str]
    next_best: str | None
    next_best_extra_per_hour: float | None
    preferred_over: dict[str, Any] | None = None


class LatestOut(BaseModel):
    """One of the newest placements: its figures and why each workload went where it did."""

    id: str | None
    name: str
    tenant: str
    created_at: str | None
    status: str
    cost_per_hour: float
    baseline_policy: str
    baseline_cost_per_hour: float | None
    savings_pct: float | None
    greedy_savings_pct: float | None = None  # the second figure, where the placement has it
    demo: bool = False  # stored by `broker finops seed-demo` (extension)
    assignments: list[LatestAssignmentOut]

    @classmethod
    def from_domain(cls, p: Placement) -> LatestOut:
        r = p.result
        return cls(
            id=p.id,
            name=p.name,
            tenant=p.tenant,
            created_at=p.created_at.isoformat() if p.created_at else None,
            status=r.status,
            cost_per_hour=r.cost_per_hour,
            demo=DEMO_WARNING in r.warnings,
            baseline_policy=r.baseline.policy,
            baseline_cost_per_hour=r.baseline.cost_per_hour,
            savings_pct=r.savings_pct,
            greedy_savings_pct=next(
                (b.savings_pct(r.cost_per_hour) for b in r.baselines[1:] if b.policy == GREEDY), None
            ),
            assignments=[
                LatestAssignmentOut(
                    workload=a.workload,
                    pool=a.pool,
                    replicas=a.replicas,
                    binding=list(a.explanation.binding),
                    next_best=a.explanation.next_best,
                    next_best_extra_per_hour=a.explanation.next_best_extra_per_hour,
                    preferred_over=None if a.explanation.preferred_over is None else dict(a.explanation.preferred_over),
                )
                for a in r.assignments
            ],
        )


class PriceAgeOut(BaseModel):
    provider: str
    price_as_of: str
    age_days: float | None
    stale: bool

    @classmethod
    def from_domain(cls, p: PriceAge) -> PriceAgeOut:
        return cls(provider=p.provider, price_as_of=p.price_as_of, age_days=p.age_days, stale=p.stale)


class ByOut(BaseModel):
    provider: list[GroupOut]
    site: list[SiteGroupOut]  # with the site's map position and name
    tenant: list[GroupOut]
    team: list[GroupOut]

    @classmethod
    def from_domain(cls, by: Mapping[str, list[GroupFigures]], sites: Mapping[str, Site]) -> ByOut:
        return cls(
            provider=[GroupOut.from_group(g) for g in by["provider"]],
            site=[SiteGroupOut.from_site_group(g, sites.get(g.key)) for g in by["site"]],
            tenant=[GroupOut.from_group(g) for g in by["tenant"]],
            team=[GroupOut.from_group(g) for g in by["team"]],
        )


class DashboardOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    tenant: str | None
    currency: str = "USD"
    baselines: list[BaselineNameOut] = Field(default_factory=_baselines)
    totals: FiguresOut
    series: SeriesOut
    by: ByOut
    latest: list[LatestOut]
    prices: list[PriceAgeOut]
    price_stale_after_days: float
    forecast: dict[str, Any]
    tenants: list[str]
    demo_placements: int = Field(
        0,
        description="extension: how many of the window's placements are demo data stored by `broker finops "
        "seed-demo` (each carries a `demo data: ...` warning); the page says so above its figures",
    )

    @classmethod
    def from_domain(cls, d: Dashboard) -> DashboardOut:
        return cls(
            from_=d.start.isoformat(),
            to=d.end.isoformat(),
            tenant=d.tenant,
            totals=FiguresOut.from_domain(d.totals),
            series=SeriesOut(
                step_hours=d.step / timedelta(hours=1),
                points=[SeriesPointOut.from_domain(p) for p in d.series],
            ),
            by=ByOut.from_domain(d.by, d.sites),
            latest=[LatestOut.from_domain(p) for p in d.latest],
            prices=[PriceAgeOut.from_domain(p) for p in d.prices],
            price_stale_after_days=d.price_stale_after_days,
            forecast=dict(d.forecast),
            tenants=list(d.tenants),
            demo_placements=d.demo_placements,
        )
