"""Running jobs, whichever queue carries them: claim, heartbeat, the kind's handler, the outcome.

The thread pool of the API process (no Redis) and `broker worker` (rq, or polling the database)
both call `run_job`; abandoned jobs are failed the same way everywhere (`watch_abandoned`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from broker.errors import BrokerError
from broker.jobs.kinds import KINDS
from broker.jobs.queue import InProcessQueue, JobQueue, RedisQueue
from broker.jobs.store import ABANDONED_CHECK_S, FailedWithResult, JobStore
from broker.observability import tenant_var
from broker.problems import error_problem, internal_problem

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger("broker.jobs")


def run_job(broker: Broker, job_id: str) -> str:
    """Run one job if this runner wins its claim. Returns the job's final status or "skipped"."""
    store = JobStore(broker.sessions)
    row = store.claim(job_id)
    if row is None:
        return "skipped"
    token = tenant_var.set(row.tenant)
    kind = KINDS.get(row.kind)
    instance = kind.submitted_at if kind is not None else f"/v1/jobs/{job_id}"
    try:
        if kind is None:  # a row of a kind this version does not know (written by a newer one)
            raise BrokerError(f"job {job_id} is of an unknown kind {row.kind!r}")
        with store.heartbeat(job_id):  # while it runs: a runner that dies stops beating
            doc = kind.handler(broker, row)
    except FailedWithResult as exc:
        store.finish(job_id, result=exc.result, error=error_problem(exc.error, instance=instance))
        return "failed"
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


def fail_abandoned(sessions: sessionmaker[Session]) -> list[str]:
    """Fail the jobs whose runner stopped, and what each kind fails with them (JobStore.fail_abandoned)."""
    return JobStore(sessions).fail_abandoned(KINDS)


def watch_abandoned(sessions: sessionmaker[Session], *, name: str = "abandoned-jobs") -> Callable[[], None]:
    """Fail abandoned jobs now and every ABANDONED_CHECK_S on a daemon thread, so a job whose
    runner died is failed even when no process restarts. Returns stop()."""
    stop = threading.Event()

    def watch() -> None:
        while True:
            try:
                fail_abandoned(sessions)
            except Exception:  # the database away: look again next time
                log.warning("could not look for abandoned jobs", exc_info=True)
            if stop.wait(ABANDONED_CHECK_S):
                return

    threading.Thread(target=watch, name=name, daemon=True).start()
    return stop.set


def make_queue(broker: Broker) -> JobQueue:
    """rq on Redis when configured (`broker worker` runs the jobs), else this process's threads."""
    if broker.settings.redis_url:
        return RedisQueue(broker.settings)
    return InProcessQueue(broker, run_job, lanes={k.name: k.lane for k in KINDS.values() if k.lane})
