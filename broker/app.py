"""Use cases: the only place that ties catalog, solver and store together."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from broker.catalog import store as catalog_mod
from broker.catalog.latency_measurements import MeasurementStore
from broker.catalog.store import Catalog, CatalogCache, default_cache_dir
from broker.core.domain import PlacementRequest
from broker.core.latency import check_quantile
from broker.core.latency_measured import apply_measurements
from broker.core.placement import Placement, PlacementSummary, PriceSnapshot, TradeOff
from broker.db.session import make_engine, migrate, preparing, session_factory, transaction
from broker.errors import InvalidRequest
from broker.finops.ledger import team_costs
from broker.ids import new_placement_id
from broker.observability import observe_placement
from broker.placements import fairshare
from broker.placements.budgets import Budgets
from broker.placements.family_quotas import FamilyQuotas
from broker.placements.request_documents import PlacementRequestIn
from broker.placements.rightsizing import Rightsizing, apply_demand
from broker.placements.store import PlacementStore
from broker.placements.time_budget import TimeBudget, TimeCaps, clock_warning, time_budget
from broker.problems import field_errors
from broker.settings import Settings
from broker.solver import PlacementProblem, SolverOptions, WorkLimits, solve
from broker.solver_runtime import prepare_process, solver_options
from broker.usage.service import UsageStore


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """The request's errors as the API answers them (field_errors: the user's fields only)."""
    return field_errors(
        {"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_context=False)
    )


def parse_request(doc: Any) -> PlacementRequestIn:
    if not isinstance(doc, dict):
        raise InvalidRequest(
            "the request must be a JSON/YAML object", errors=[{"loc": ["body"], "msg": "not an object"}]
        )
    try:
        return PlacementRequestIn.model_validate(doc)
    except ValidationError as exc:
        raise InvalidRequest("the placement request is invalid", errors=validation_errors(exc)) from exc


@dataclass
class Broker:
    """Everything a request needs: settings, database, catalog cache."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    catalogs: CatalogCache

    @classmethod
    def open(cls, settings: Settings, *, prepare: bool = True) -> Broker:
        prepare_process()
        url = settings.resolved_database_url()
        engine = make_engine(url)
        factory = session_factory(engine)
        cache_dir = None
        if settings.catalog_cache_dir != "off":
            cache_dir = Path(settings.catalog_cache_dir) if settings.catalog_cache_dir else default_cache_dir()
        broker = cls(settings, engine, factory, CatalogCache(factory, cache_dir))
        if prepare:
            with preparing(url):  # one process at a time migrates and loads a fresh database
                migrate(url)
                if catalog_mod.is_empty(factory):
                    catalog_mod.load_snapshot(factory)
        return broker

    def catalog(self) -> Catalog:
        return self.catalogs.get()

    def close(self) -> None:
        """Close the database connections (the edge that opened the Broker calls this when done)."""
        self.engine.dispose()

    # ---- placements -------------------------------------------------------------------

    def place(
        self,
        doc: PlacementRequestIn | Any,
        *,
        tenant: str = "default",
        exclude_sites: Collection[str] = (),
        current: Mapping[str, Mapping[str, int]] | None = None,
        synchronous: bool = True,
        time_limit_s: float | None = None,
        store_if: Callable[[Placement], bool] | None = None,
    ) -> tuple[Placement, bool]:
        """Solve a placement request; store it unless it is a dry run. Returns (placement, stored).

        `exclude_sites` (failed sites) offer no capacity; `current` (pool -> workload ->
        replicas) is the running placement a replan would rather not move away from.
        `synchronous`: someone waits for the answer (an HTTP request): the solver's time is
        capped by `sync_time_limit_s`, else (a job, the CLI) by `async_time_limit_s`.
        `time_limit_s`: what the caller has left for the solve (a re-plan's share of its own
        deadline), when less than the request's budget. `store_if`: decides on the solved
        placement whether it is stored (a re-plan stores only a move that pays), so a caller
        that must see the answer first does not solve twice; not asked for a dry run.
        """
        req_in = doc if isinstance(doc, PlacementRequestIn) else parse_request(doc)
        time_limit = self.time_budget(req_in, synchronous=synchronous)
        solve_s = time_limit.seconds if time_limit_s is None else max(0.0, min(time_limit.seconds, time_limit_s))
        cat = self.catalog()
        request, problem, rightsizing = self.problem_for(
            req_in, cat, tenant=tenant, exclude_sites=exclude_sites, current=current
        )
        table = problem.table
        result = solve(problem, time_limit_s=solve_s, options=self._solver_options(request))
        if (capped := time_limit.warning(TimeCaps.of(self.settings).async_s)) is not None:
            result = replace(result, warnings=(*result.warnings, capped))
        used = {n.pool.split(":", 1)[0] for n in result.nodes}
        prices = self._price_snapshot(cat, [n.pool for n in result.nodes])
        from broker.catalog.prices import stale_warning

        if (stale := stale_warning(prices)) is not None:  # once per answer, where users look
            result = replace(result, warnings=(*result.warnings, stale))
        clock = clock_warning(
            status=result.status,
            stop_reason=result.stop_reason,
            gap_pct=result.gap_pct,
            reproducible=request.reproducible,
        )
        if clock is not None:
            result = replace(result, warnings=(*result.warnings, clock))
        placement = Placement(
            name=request.name,
            tenant=tenant,
            result=result,
            request=req_in.model_dump(mode="json"),
            latency_quantile=request.latency_quantile,
            price_as_of={p: d for p, d in cat.price_as_of.items() if p in used},
            prices=prices,
            # declared vs forecast-sized requests, both priced
            rightsizing=rightsizing.section(
                problem, result.cost_per_hour, time_limit.seconds, options=self._solver_options(request)
            )
            if rightsizing is not None
            else None,
        )
        budgets = Budgets(self.sessions)
        teams = team_costs(placement)  # a team's budget counts its workloads' part (docs/finops.md)
        if request.dry_run or (store_if is not None and not store_if(placement)):
            with self.sessions() as s:
                budget = budgets.check(
                    s, tenant=tenant, req=req_in, cost_per_hour=result.cost_per_hour, team_costs=teams
                )
            placement = replace(placement, budget=budget)
            observe_placement(placement, stored=False)
            return placement, False
        pid = new_placement_id()
        with transaction(self.sessions) as s:
            budget = budgets.check(s, tenant=tenant, req=req_in, cost_per_hour=result.cost_per_hour, team_costs=teams)
            scarce = fairshare.scarce_nodes(table, result.nodes)
            budgets.commit(
                s,
                tenant=tenant,
                req=req_in,
                pid=pid,
                cost_per_hour=result.cost_per_hour,
                scarce_nodes=scarce,
                team_costs=teams,
            )
            placement = replace(placement, id=pid, created_at=datetime.now(UTC), budget=budget)
            PlacementStore.add(s, placement)
        observe_placement(placement, stored=True)
        return placement, True

    def _solver_options(self, request: PlacementRequest) -> SolverOptions:
        """The service's solver options; a reproducible request's solves end on work limits."""
        options = solver_options(self.settings)
        return replace(options, work_limits=WorkLimits()) if request.reproducible else options

    def pareto(self, doc: PlacementRequestIn | Any, *, tenant: str = "default") -> dict[str, list[TradeOff]]:
        """Cost-latency and cost-carbon Pareto fronts of a request, each point a full (unstored) placement."""
        from broker.solver.pareto import pareto_fronts

        req_in = doc if isinstance(doc, PlacementRequestIn) else parse_request(doc)
        cat = self.catalog()
        request, problem, _ = self.problem_for(req_in, cat, tenant=tenant)
        # a front is many solves in one synchronous answer: four budgets, within the sync cap
        limit = min(self.time_budget(req_in, synchronous=True).seconds * 4, TimeCaps.of(self.settings).sync_s)
        fronts = pareto_fronts(problem, time_limit_s=limit, options=self._solver_options(request))
        as_sent = req_in.model_dump(mode="json")
        return {
            name: [
                TradeOff(
                    weights=p.weights,
                    cost_per_hour=p.cost_per_hour,
                    latency_ms=p.latency_ms,
                    carbon_kg_per_hour=p.carbon_kg_per_hour,
                    placement=Placement(
                        name=request.name,
                        tenant=tenant,
                        result=p.result,
                        request=as_sent,
                        latency_quantile=request.latency_quantile,
                    ),
                )
                for p in points
            ]
            for name, points in fronts.items()
        }

    def time_budget(self, req: PlacementRequestIn, *, synchronous: bool) -> TimeBudget:
        """The solver's time limit for a request: its time_limit_s or the default for its size,
        within the cap of how it runs (docs/operations.md, "Time a placement gets")."""
        caps = TimeCaps.of(self.settings)
        return time_budget(req.time_limit_s, len(req.workloads), caps, synchronous=synchronous)

    def problem_for(
        self,
        req_in: PlacementRequestIn,
        cat: Catalog,
        *,
        tenant: str,
        exclude_sites: Collection[str] = (),
        current: Mapping[str, Mapping[str, int]] | None = None,
    ) -> tuple[PlacementRequest, PlacementProblem, Rightsizing | None]:
        """What `tenant` asks the solver, as every solve of a request sees it (a placement, a
        re-plan, a Pareto front): workloads sized from the tenant's usage where they ask for it,
        the pools they may use with owned capacity cut to the tenant's fair share, and the
        tenant's own RTT measurements (they win over the catalog's figures for the paths they
        cover)."""
        sized_in, rightsizing = apply_demand(UsageStore(self.sessions), req_in, tenant=tenant)
        request = sized_in.to_domain()
        self._check_references(req_in, cat)
        # a re-plan keeps the pools it runs on in the table, dominated or not: its baseline, the
        # placement in force, is priced on them
        running = {*(current or {}), *(pool for _w, pool, _r in request.current)}
        quotas = FamilyQuotas(self.sessions).for_tenant(tenant)
        table = cat.table_for(request, self.settings.node_overhead(), keep=running, family_quotas=quotas)
        if np.isfinite(table.max_nodes).any():  # owned capacity is shared by fair-share rules
            table = fairshare.capped_table(
                table,
                tenant=tenant,
                weights=self.settings.fair_share_weights,
                others=fairshare.used_by_others(self.sessions, tenant),
            )
        if exclude_sites:
            gone = [table.site_index[x] for x in exclude_sites if x in table.site_index]
            table = replace(table, max_nodes=np.where(np.isin(table.site_idx, gone), 0.0, table.max_nodes))
        quantile = check_quantile(request.latency_quantile)
        user_rtt = cat.user_rtt(request.user_regions, quantile)
        if measured := MeasurementStore(self.sessions).for_tenant(tenant):
            user_rtt = apply_measurements(user_rtt, request.user_regions, measured, cat.table.site_index, quantile)
        problem = PlacementProblem(
            request=request,
            table=table,
            user_rtt=user_rtt,
            egress_usd_per_gb=cat.egress,
            internet_egress_usd_per_gb=cat.internet_egress,
            storage_usd_per_gb_month=cat.storage,
            current=current or {},
            family_quotas=quotas,
        )
        if rightsizing is not None:  # the kubernetes-packer baseline runs what the user declared
            problem = replace(problem, declared=rightsizing.declared.to_domain())
        return request, problem, rightsizing

    def _price_snapshot(self, cat: Catalog, pool_ids: list[str]) -> PriceSnapshot:
        from broker.catalog.prices import price_snapshot

        t = cat.table
        used = {pid: t.pools[t.pool_index[pid]] for pid in pool_ids if pid in t.pool_index}
        return price_snapshot(
            cat.version,
            {pid: (p.price_per_hour, p.price_source, p.price_as_of) for pid, p in used.items()},
            stale_after_days=self.settings.price_stale_after_days,
        )

    def _check_references(self, req: PlacementRequestIn, cat: Catalog) -> None:
        errors = []
        for i, u in enumerate(req.user_regions):
            if u.site is not None and u.site not in cat.sites:
                errors.append({"loc": ["body", "user_regions", i, "site"], "msg": f"unknown site {u.site!r}"})
        if errors:
            raise InvalidRequest("the placement request names unknown sites", errors=errors)

    def get_placement(self, pid: str, *, tenant: str | None = "default") -> Placement:
        """`tenant=None`: a placement of any tenant (the operator: the CLI, the API without a key)."""
        return PlacementStore(self.sessions).get(pid, tenant=tenant)

    def list_placements(
        self, *, tenant: str = "default", limit: int = 50, offset: int = 0, name: str | None = None
    ) -> tuple[list[PlacementSummary], int]:
        return PlacementStore(self.sessions).page(tenant=tenant, limit=limit, offset=offset, name=name)


__all__ = ["Broker", "parse_request"]
