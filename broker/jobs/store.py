"""Where jobs are stored: their state lives in the database, the queue only carries job ids.

So a job's status survives any restart of the API or the worker, a job is polled
the same way whichever queue runs it, and running one twice is harmless: a
runner first claims it (queued -> running in one UPDATE), and only one claim wins. What a job
does is its kind's (kinds.py); running one is runner.py's. This module only stores.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from broker.db.service_models import JobRow
from broker.db.session import transaction
from broker.errors import BrokerError, NotFound, RunnerStopped
from broker.ids import new_job_id
from broker.problems import error_problem

log = logging.getLogger("broker.jobs")

KIND_PLACEMENT = "placement"
# a running job's runner writes its heartbeat this often (a thread beside the job); a job still
# "running" whose heartbeat is older than HEARTBEAT_STALE lost its runner (killed, crashed) and is
# failed with a runner-stopped problem, never run again (a placement job that stored its placement
# must not store a second one). ABANDONED_CHECK_S: how often API processes and workers look
HEARTBEAT_EVERY_S = 15.0
HEARTBEAT_STALE = timedelta(seconds=120)
ABANDONED_CHECK_S = 30.0


class FailedWithResult(Exception):
    """A job that failed with a result worth keeping (a price refresh: every provider's outcome,
    some of them failed); `error` becomes the job's problem document."""

    def __init__(self, error: BrokerError, result: dict[str, Any]) -> None:
        super().__init__(str(error))
        self.error, self.result = error, result


class Abandoning(Protocol):
    """What failing an abandoned job of a kind needs of the kind (broker/jobs/kinds.py)."""

    @property
    def submitted_at(self) -> str: ...

    def abandoned(self, s: Session, request: Any, problem: dict[str, Any], now: datetime) -> None: ...


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

    def withdraw(self, job_id: str) -> bool:
        """Delete a job no runner has claimed (its queue could not take it). False: it was claimed."""
        with transaction(self._sessions) as s:
            res = s.execute(delete(JobRow).where(JobRow.id == job_id, JobRow.status == "queued"))
            return getattr(res, "rowcount", 0) == 1

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
        """Jobs to (re)enqueue after a restart: the queued ones."""
        return [job_id for job_id, _kind in self.pending()]

    def pending(self) -> list[tuple[str, str]]:
        """The queued jobs, oldest first: (id, kind)."""
        with self._sessions() as s:
            q = select(JobRow.id, JobRow.kind).where(JobRow.status == "queued")
            return [(job_id, kind) for job_id, kind in s.execute(q.order_by(JobRow.created_at))]

    def depth(self) -> int:
        with self._sessions() as s:
            return int(s.scalar(select(func.count()).where(JobRow.status == "queued")) or 0)

    def claim(self, job_id: str) -> JobRow | None:
        now = datetime.now(UTC)
        with transaction(self._sessions) as s:
            res = s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.status == "queued")
                .values(status="running", started_at=now, heartbeat_at=now, attempts=JobRow.attempts + 1)
            )
            if getattr(res, "rowcount", 0) != 1:
                return None
            return s.get(JobRow, job_id)

    def beat(self, job_id: str) -> None:
        """The runner of a running job is alive."""
        with transaction(self._sessions) as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.status == "running")
                .values(heartbeat_at=datetime.now(UTC))
            )

    @contextmanager
    def heartbeat(self, job_id: str) -> Iterator[None]:
        """Beat every HEARTBEAT_EVERY_S on a thread while the body runs the job: a process that
        dies (kill -9) stops beating with it, however long its solve."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_EVERY_S):
                try:
                    self.beat(job_id)
                except Exception:  # the database away for a moment: the next beat may get through
                    log.warning("heartbeat of job %s not written", job_id, exc_info=True)

        thread = threading.Thread(target=beat, name=f"heartbeat-{job_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)

    def fail_abandoned(self, kinds: Mapping[str, Abandoning]) -> list[str]:
        """Fail the running jobs whose runner stopped (no heartbeat for HEARTBEAT_STALE; a job
        claimed before heartbeats existed: by its start), with a runner-stopped problem, and what
        the job's kind fails with it (a simulation job's simulation), in the same transaction.
        Safe beside other processes doing the same and beside live runners: each row is failed
        by one UPDATE that checks the heartbeat is still stale."""
        stale = datetime.now(UTC) - HEARTBEAT_STALE
        last = func.coalesce(JobRow.heartbeat_at, JobRow.started_at)
        abandoned = (JobRow.status == "running") & (last < stale)
        failed = []
        with self._sessions() as s:
            rows = list(s.execute(select(JobRow.id, JobRow.kind, JobRow.request).where(abandoned)))
        for job_id, kind, request in rows:
            doc = error_problem(
                RunnerStopped(
                    f"the process running job {job_id} stopped (killed or crashed) before the job finished; "
                    "the job is not run again: send the request again",
                    job_id=job_id,
                ),
                instance=kinds[kind].submitted_at if kind in kinds else f"/v1/jobs/{job_id}",
            )
            now = datetime.now(UTC)
            with transaction(self._sessions) as s:
                res = s.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, abandoned)
                    .values(status="failed", error=doc, finished_at=now)
                )
                if getattr(res, "rowcount", 0) != 1:
                    continue  # it beat meanwhile, finished, or another process failed it
                if kind in kinds:
                    kinds[kind].abandoned(s, request, doc, now)
            log.warning("job %s failed: its runner stopped (no heartbeat since %s)", job_id, stale)
            failed.append(job_id)
        return failed

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
