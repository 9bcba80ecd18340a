"""Fleet simulations as async jobs: validated when asked for, run on the job queue, stored at the end.

`POST /v1/simulations` validates the whole input first (fleet, policies, sites against the
broker's catalog, series and length against the bundled traces), so bad input is a 422 naming
the field, never a failed job. The run then goes through the job queue (a thread of the API, or
`broker worker` processes on Redis), writes its progress as it goes, looks for a cancellation at
each progress write, and stores its results in the one transaction that marks it succeeded.
"""

from __future__ import annotations

import builtins
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from broker.db.session import transaction
from broker.db.simulation_models import SimulationRow
from broker.errors import BrokerError, Conflict, InvalidRequest, NotFound, QueueUnavailable
from broker.ids import new_simulation_id
from broker.jobs.queue import JobQueue, submit
from broker.jobs.store import JobStore
from broker.problems import error_problem, internal_problem
from broker.simulate.fleet import STEP_S, FleetIn, parse_fleet
from broker.simulate.load import parts_of
from broker.simulate.metrics import events_frame, series_frame, summary_frame
from broker.simulate.policies import POLICIES
from broker.simulate.run import Simulation, check_policies, invalid_summary, prepare, run_simulation
from broker.solver_runtime import solver_options
from pricing.traces import read_usage_traces

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger("broker.simulations")
KIND_SIMULATION = "simulation"
SUBMITTED_AT = "/v1/simulations"  # where a simulation is asked for: a failed one's problem `instance`
DEFAULT_POLICIES = ("kube-default", "cheapest-fit", "karpenter-like", "broker")
# the stored per-step figures (the dashboard's plots); longer runs are stored hourly
STORED_SERIES = (
    "spend_per_hour",
    "cpu_utilisation",
    "memory_utilisation",
    "starved_core_min",
    "unavailable_replica_min",
    "nodes",
)
MAX_STORED_POINTS = 2016
PROGRESS_EVERY = 0.02


class Cancelled(Exception):
    pass


def describe(row: SimulationRow, *, results: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row.id,
        "tenant": row.tenant,
        "name": row.name,
        "status": row.status,
        "progress": round(row.progress, 4),
        "progress_detail": row.progress_detail,
        "created_at": row.created_at.isoformat(),
        "started_at": row.started_at.isoformat() if row.started_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
        "policies": list(row.request.get("policies", [])),
        "days": row.request.get("days"),
        "seed": row.request.get("seed"),
        "error": row.error,
        # a cancel asked for and not yet taken: the run stops at its next progress write
        "cancel_requested": bool(row.cancel_requested) and row.status in ("queued", "running"),
        "warnings": row.warnings,  # small, and a reason to doubt a run: listed too
        # who ran it: the API's job, or `broker simulate --store` (the CLI ran it and stored it here)
        "source": row.request.get("source", "api"),
    }
    if results:
        out.update(summary=row.summary, series=row.series, events=row.events)
    return out


class SimulationService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    # ---- asking ------------------------------------------------------------------

    def validate(self, fleet_doc: Any, *, policies: list[str], days: float | None, seed: int | None) -> FleetIn:
        """Everything a run would refuse, refused now, every offending field in one InvalidRequest;
        error locations as in the request body."""
        errors: list[dict[str, Any]] = []
        try:
            names = check_policies(policies)
        except InvalidRequest as exc:
            errors += _within(exc, ["body"]).errors
            names = [n for n in dict.fromkeys(policies) if n in POLICIES]
        fleet = None
        try:
            fleet = parse_fleet(fleet_doc)
            if fleet.traces is not None:
                msg = "trace files are read by the CLI only; the API replays the bundled traces or inline usage"
                raise InvalidRequest(msg, errors=[{"loc": ["traces"], "msg": msg}])
        except InvalidRequest as exc:
            errors += _within(exc, ["body", "fleet"]).errors
            fleet = None
        try:
            if fleet is not None:
                prepare(
                    fleet,
                    parts_of(self.broker.catalog()),
                    read_usage_traces(),
                    policies=names,
                    days=fleet.days if days is None else days,
                    overhead=self.broker.settings.node_overhead(),
                )
        except InvalidRequest as exc:
            errors += _within(exc, ["body", "fleet"], days_given=days is not None).errors
        if errors or fleet is None:
            raise InvalidRequest(invalid_summary(errors), errors=errors)
        return fleet if seed is None else fleet.model_copy(update={"seed": seed})

    def create(
        self,
        fleet_doc: dict[str, Any],
        *,
        tenant: str,
        policies: list[str] | None = None,
        days: float | None = None,
        seed: int | None = None,
    ) -> tuple[dict[str, Any], str]:
        """A queued simulation and the job that runs it: (simulation, job id)."""
        names = list(policies) if policies is not None else list(DEFAULT_POLICIES)
        fleet = self.validate(fleet_doc, policies=names, days=days, seed=seed)
        sid = new_simulation_id()
        request = {"fleet": fleet_doc, "policies": names, "days": days or fleet.days, "seed": fleet.seed}
        with transaction(self.broker.sessions) as s:
            row = SimulationRow(
                id=sid,
                tenant=tenant,
                name=fleet.name,
                status="queued",
                cancel_requested=False,
                request=request,
                progress=0.0,
                progress_detail="",
                created_at=datetime.now(UTC),
            )
            s.add(row)
            out = describe(row, results=False)
        job = JobStore(self.broker.sessions).create(tenant=tenant, request={"simulation_id": sid}, kind=KIND_SIMULATION)
        return out, str(job["id"])

    def store_finished(
        self, sim: Simulation, fleet_doc: Any, *, tenant: str, policies: builtins.list[str], started_at: datetime
    ) -> dict[str, Any]:
        """A run the CLI made (`broker simulate --store`), stored as a succeeded simulation with
        the same results an API run stores, so GET /v1/simulations and the dashboard show it."""
        sid = new_simulation_id()
        request = {
            "fleet": fleet_doc,
            "policies": policies,
            "days": sim.days,
            "seed": sim.fleet.seed,
            "source": "cli",
        }
        now = datetime.now(UTC)
        with transaction(self.broker.sessions) as s:
            row = SimulationRow(
                id=sid,
                tenant=tenant,
                name=sim.fleet.name,
                status="succeeded",
                cancel_requested=False,
                request=request,
                progress=1.0,
                progress_detail="",
                created_at=started_at,
                started_at=started_at,
                finished_at=now,
                **_results(sim),
            )
            s.add(row)
            return describe(row, results=False)

    def submit(self, queue: JobQueue, sid: str, job_id: str) -> None:
        """Queue the job of a simulation just created; when the queue cannot take it, the
        simulation goes with its job (nothing is left to run later) and QueueUnavailable goes up."""
        try:
            submit(queue, JobStore(self.broker.sessions), job_id)
        except QueueUnavailable:
            with transaction(self.broker.sessions) as s:
                s.execute(delete(SimulationRow).where(SimulationRow.id == sid, SimulationRow.status == "queued"))
            raise

    # `tenant` None: every tenant's runs (the local user with authentication off, as /v1/dashboard)

    def get(self, sid: str, *, tenant: str | None) -> dict[str, Any]:
        with self.broker.sessions() as s:
            row = s.get(SimulationRow, sid)
            if row is None or tenant not in (None, row.tenant):
                raise NotFound(f"simulation {sid!r} does not exist")
            return describe(row)

    def list(self, *, tenant: str | None, limit: int = 50, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        with self.broker.sessions() as s:
            q = select(SimulationRow)
            if tenant is not None:
                q = q.where(SimulationRow.tenant == tenant)
            total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
            rows = s.scalars(
                q.order_by(SimulationRow.created_at.desc(), SimulationRow.id.desc()).limit(limit).offset(offset)
            )
            return [describe(r, results=False) for r in rows], int(total)

    def tenants(self, *, tenant: str | None) -> builtins.list[str]:
        """The tenants that have simulations, of those `tenant` may see."""
        with self.broker.sessions() as s:
            q = select(SimulationRow.tenant).distinct().order_by(SimulationRow.tenant)
            if tenant is not None:
                q = q.where(SimulationRow.tenant == tenant)
            return list(s.scalars(q))

    def cancel(self, sid: str, *, tenant: str | None) -> dict[str, Any]:
        """A queued run is cancelled at once; a running one at its next progress write."""
        with transaction(self.broker.sessions) as s:
            row = s.get(SimulationRow, sid)
            if row is None or tenant not in (None, row.tenant):
                raise NotFound(f"simulation {sid!r} does not exist")
            if row.status in ("succeeded", "failed", "cancelled"):
                raise Conflict(f"simulation {sid!r} has already {row.status}")
            row.cancel_requested = True
            if row.status == "queued":
                row.status = "cancelled"
                row.finished_at = datetime.now(UTC)
            return describe(row, results=False)

    # ---- running -----------------------------------------------------------------

    def run(self, sid: str) -> str:
        """Run a queued simulation if this runner claims it; its final status, or "skipped"."""
        now = datetime.now(UTC)
        with transaction(self.broker.sessions) as s:
            res = s.execute(
                update(SimulationRow)
                .where(SimulationRow.id == sid, SimulationRow.status == "queued")
                .values(status="running", started_at=now)
            )
            if getattr(res, "rowcount", 0) != 1:
                return "skipped"
            row = s.get(SimulationRow, sid)
            assert row is not None
            request = dict(row.request)
        try:
            sim = run_simulation(
                parse_fleet(request["fleet"]),
                parts_of(self.broker.catalog()),
                read_usage_traces(),
                policies=list(request["policies"]),
                days=float(request["days"]),
                seed=int(request["seed"]),
                progress=self._progress(sid, len(request["policies"])),
                solver_options=solver_options(self.broker.settings),
                overhead=self.broker.settings.node_overhead(),
            )
        except Cancelled:
            self._end(sid, "cancelled", error={"type": "cancelled", "detail": "cancelled on request"})
            return "cancelled"
        except BrokerError as exc:  # the document POST would have answered with (as a failed job's error)
            self._end(sid, "failed", error=error_problem(exc, instance=SUBMITTED_AT))
            return "failed"
        except Exception:  # a run must end with a status, whatever broke
            log.exception("simulation %s crashed", sid)
            self._end(sid, "failed", error=internal_problem(instance=SUBMITTED_AT))
            return "failed"
        return self._end(sid, "succeeded", results=_results(sim))

    def _progress(self, sid: str, n_policies: int) -> Any:
        seen: list[str] = []
        written = [-1.0]

        def tick(policy: str, done: int, total: int) -> None:
            if not seen or seen[-1] != policy:
                seen.append(policy)
            share = (len(seen) - 1 + done / total) / n_policies
            if share - written[0] < PROGRESS_EVERY and done != total:
                return
            written[0] = share
            with transaction(self.broker.sessions) as s:
                row = s.get(SimulationRow, sid)
                if row is None or row.cancel_requested:
                    raise Cancelled
                row.progress = min(share, 1.0)
                row.progress_detail = f"{policy}: step {done} of {total}"

        return tick

    def _end(
        self, sid: str, status: str, *, error: dict[str, Any] | None = None, results: dict[str, Any] | None = None
    ) -> str:
        with transaction(self.broker.sessions) as s:
            row = s.get(SimulationRow, sid)
            if row is None:
                return status
            if status == "succeeded" and row.cancel_requested:
                status, error, results = "cancelled", {"type": "cancelled", "detail": "cancelled on request"}, None
            row.status = status
            row.error = error
            row.finished_at = datetime.now(UTC)
            if results is not None:
                row.progress = 1.0
                row.summary = results["summary"]
                row.series = results["series"]
                row.events = results["events"]
                row.warnings = results["warnings"]
        return status


def _within(exc: InvalidRequest, prefix: list[Any], *, days_given: bool = False) -> InvalidRequest:
    """The same error, its field locations made relative to the request body (a too-long run is
    the body's `days` when the request gave one)."""
    errors = []
    for e in exc.errors:
        loc = list(e.get("loc", []))
        where = ["body", "days"] if loc == ["days"] and days_given else [*prefix, *loc]
        errors.append({**e, "loc": where})
    return InvalidRequest(exc.detail, errors=errors)


def _results(sim: Simulation) -> dict[str, Any]:
    """What a finished run stores (SimulationRow's result columns)."""
    return {
        "summary": summary_frame(sim.runs).to_dict("records"),
        "series": _series(sim.runs),
        "events": events_frame(sim.runs).to_dict("records"),
        "warnings": sim.warnings,
    }


def _series(runs: list[Any]) -> dict[str, Any]:
    """Per policy: hour and the stored figures, per step, or hourly means for long runs."""
    frame = series_frame(runs)
    out: dict[str, Any] = {}
    per_hour = 3600 // STEP_S
    for policy, df in frame.groupby("policy", sort=False):
        cols = {"hour": df["hour"].to_numpy()} | {k: df[k].to_numpy() for k in STORED_SERIES}
        if len(df) > MAX_STORED_POINTS:
            n = len(df) // per_hour * per_hour
            cols = {k: v[:n].reshape(-1, per_hour).mean(axis=1) for k, v in cols.items()}
            cols["hour"] = np.floor(cols["hour"])
        out[str(policy)] = {k: [round(float(x), 5) for x in v] for k, v in cols.items()}
    return out


def run_simulation_job(broker: Broker, request: dict[str, Any]) -> dict[str, Any]:
    """What a job of kind "simulation" does: run it; the job's result names the simulation."""
    sid = str(request["simulation_id"])
    status = SimulationService(broker).run(sid)
    if status in ("failed", "cancelled"):  # the job fails with it; the simulation's row says why
        raise BrokerError(f"simulation {sid} {status}", simulation_id=sid, simulation_status=status)
    return {"simulation_id": sid, "status": status}


def fail_with_job(s: Session, request: Any, problem: dict[str, Any], now: datetime) -> None:
    """An abandoned simulation job's simulation fails with it (in the job's transaction)."""
    if isinstance(request, dict) and request.get("simulation_id"):
        s.execute(
            update(SimulationRow)
            .where(SimulationRow.id == str(request["simulation_id"]), SimulationRow.status.in_(("queued", "running")))
            .values(status="failed", error=problem, finished_at=now)
        )
