"""Async placement jobs: their state lives in the database, the queue only carries job ids.

So a job's status survives any restart of the API or the worker, a job is polled
the same way whichever queue runs it, and running one twice is harmless: a
runner first claims it (queued -> running in one UPDATE), and only one claim wins.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from broker.db.service_models import JobRow
from broker.db.session import transaction
from broker.errors import BrokerError, NotFound
from broker.observability import tenant_var
from broker.placements.documents import placement_document
from broker.problems import error_problem, internal_problem

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger("broker.jobs")

KIND_PLACEMENT = "placement"
# where each kind of job was asked for: a failed job's problem document names it as its
# `instance`, so the document is the one that request would have been answered with
SUBMITTED_AT = {KIND_PLACEMENT: "/v1/placements", "simulation": "/v1/simulations"}
# a job still "running" after this long was left by a runner that died; it may be claimed again
STALE_RUNNING = timedelta(hours=1)


def new_job_id() -> str:
    return f"job_{int(time.time() * 1000):x}{os.urandom(8).hex()}"


def describe(row: JobRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "status": row.status,
        "created_at": row.created_at.isoformat(),
        "started_at": row.started_at.isoformat() if row.started_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
        "attempts": row.attempts,
        "placement_id": row.placement_id,
        "result": row.result,
        "error": row.error,
    }


class JobStore:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def create(self, *, tenant: str, request: dict[str, Any], kind: str = KIND_PLACEMENT) -> dict[str, Any]:
        with transaction(self._sessions) as s:
            row = JobRow(
                id=new_job_id(),
                tenant=tenant,
                kind=kind,
                status="queued",
                request=request,
                attempts=0,
                created_at=datetime.now(UTC),
            )
            s.add(row)
            return describe(row)

    def get(self, job_id: str, *, tenant: str) -> dict[str, Any]:
        with self._sessions() as s:
            row = s.get(JobRow, job_id)
            if row is None or row.tenant != tenant:
                raise NotFound(f"job {job_id!r} does not exist")
            return describe(row)

    def list_jobs(self, *, tenant: str, limit: int = 50, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        with self._sessions() as s:
            q = select(JobRow).where(JobRow.tenant == tenant)
            total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
            rows = s.scalars(q.order_by(JobRow.created_at.desc(), JobRow.id.desc()).limit(limit).offset(offset))
            return [describe(r) for r in rows], int(total)

    def pending_ids(self) -> list[str]:
        """Jobs to (re)enqueue after a restart: queued ones and runs abandoned long ago."""
        stale = datetime.now(UTC) - STALE_RUNNING
        with self._sessions() as s:
            q = select(JobRow.id).where(
                (JobRow.status == "queued") | ((JobRow.status == "running") & (JobRow.started_at < stale))
            )
            return list(s.scalars(q.order_by(JobRow.created_at)))

    def depth(self) -> int:
        with self._sessions() as s:
            return int(s.scalar(select(func.count()).where(JobRow.status == "queued")) or 0)

    def claim(self, job_id: str) -> JobRow | None:
        now = datetime.now(UTC)
        with transaction(self._sessions) as s:
            res = s.execute(
                update(JobRow)
                .where(
                    JobRow.id == job_id,
                    (JobRow.status == "queued")
                    | ((JobRow.status == "running") & (JobRow.started_at < now - STALE_RUNNING)),
                )
                .values(status="running", started_at=now, attempts=JobRow.attempts + 1)
            )
            if getattr(res, "rowcount", 0) != 1:
                return None
            return s.get(JobRow, job_id)

    def finish(self, job_id: str, *, result: dict[str, Any] | None, error: dict[str, Any] | None) -> None:
        with transaction(self._sessions) as s:
            row = s.get(JobRow, job_id)
            if row is None:
                return
            row.status = "failed" if error is not None else "succeeded"
            row.result = result
            row.error = error
            row.placement_id = (result or {}).get("id")
            row.finished_at = datetime.now(UTC)


def run_job(broker: Broker, job_id: str) -> str:
    """Run one job if this runner wins its claim. Returns the job's final status or "skipped"."""
    store = JobStore(broker.sessions)
    row = store.claim(job_id)
    if row is None:
        return "skipped"
    token = tenant_var.set(row.tenant)
    instance = SUBMITTED_AT.get(row.kind, f"/v1/jobs/{job_id}")
    try:
        if row.kind == "simulation":  # a fleet simulation (broker/jobs/simulations.py): its own row keeps its state
            from broker.jobs.simulations import run_simulation_job

            doc = run_simulation_job(broker, row.request)
        else:
            # nobody holds a connection open for a job: it gets the asynchronous cap
            placement, _stored = broker.place(row.request, tenant=row.tenant, synchronous=False)
            doc = placement_document(placement)
    except BrokerError as exc:
        store.finish(job_id, result=None, error=error_problem(exc, instance=instance))
        return "failed"
    except Exception:  # a job must end with a status, whatever broke
        log.exception("job %s crashed", job_id)
        store.finish(job_id, result=None, error=internal_problem(instance=instance))
        return "failed"
    finally:
        tenant_var.reset(token)
    store.finish(job_id, result=doc, error=None)
    return "succeeded"
