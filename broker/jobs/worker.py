"""`broker worker`: runs queued jobs from Redis (rq) or, without Redis, by polling the database."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.jobs.runner import fail_abandoned, run_job, watch_abandoned
from broker.jobs.store import JobStore

if TYPE_CHECKING:
    from broker.app import Broker
    from broker.settings import Settings

log = logging.getLogger("broker.worker")
WORKER_TTL_S = 60
_broker: Broker | None = None


def use(broker: Broker) -> None:
    """The Broker that jobs run with in this process (opened once: the catalog stays warm)."""
    global _broker
    _broker = broker


def run(job_id: str) -> str:
    """The function rq calls for every job."""
    global _broker
    if _broker is None:
        from broker.app import Broker
        from broker.settings import Settings

        _broker = Broker.open(Settings(), prepare=False)
    return run_job(_broker, job_id)


def resume_dispatches(broker: Broker) -> int:
    """Finish the dispatches an interrupted process left `pending` or `applying`; returns how many.

    Safe to run while another process resumes the same dispatch: rows already `done` are
    skipped and every apply is idempotent (server-side apply; a git commit only on change).
    A failure is logged and recorded on the dispatch, never raised: start-up must go on.
    """
    from broker.dispatch.outbox import DispatchService

    try:
        docs = DispatchService(broker).resume_unfinished()
    except Exception:
        log.exception("could not resume unfinished dispatches")
        return 0
    for doc in docs:
        log.info("resumed dispatch %s: %s", doc["id"], doc["state"])
    return len(docs)


def serve(broker: Broker, *, burst: bool = False, poll_s: float = 1.0) -> int:
    """Run jobs until stopped (or, with burst, until the queue is empty). Returns jobs run.

    Dispatches interrupted by a crash are resumed first, and jobs whose runner died (no
    heartbeat) are failed, at start and every ABANDONED_CHECK_S while the worker runs.
    """
    use(broker)
    broker.catalog()
    resume_dispatches(broker)
    store = JobStore(broker.sessions)
    fail_abandoned(broker.sessions)
    stop_watching = watch_abandoned(broker.sessions)
    try:
        return _serve(broker, store, burst=burst, poll_s=poll_s)
    finally:
        stop_watching()


def _serve(broker: Broker, store: JobStore, *, burst: bool, poll_s: float) -> int:
    if broker.settings.redis_url:
        from rq import SimpleWorker

        from broker.jobs.queue import RedisQueue

        rq_queue = RedisQueue(broker.settings)
        # jobs whose Redis entry was lost (Redis restarted without persistence) are still
        # "queued" in the database: enqueue them again; a job that already ran is skipped
        for job_id in store.pending_ids():
            if rq_queue.queue.fetch_job(job_id) is None:
                rq_queue.enqueue(job_id)
        # SimpleWorker runs jobs in this process: no fork per job, the catalog stays loaded. Its
        # heartbeat (`broker worker --check`) renews its key every WORKER_TTL_S - 15 s while idle
        # and covers the job's timeout while it runs; a worker that stops beating is gone from
        # Redis WORKER_TTL_S + 60 s later
        worker = SimpleWorker([rq_queue.queue], connection=rq_queue.connection, worker_ttl=WORKER_TTL_S)
        worker.work(burst=burst, logging_level="INFO", with_scheduler=False)
        return -1  # rq counts its own jobs (`rq info`)
    done = 0
    while True:
        ids = store.pending_ids()
        for job_id in ids:
            if run_job(broker, job_id) != "skipped":
                done += 1
        if burst and not ids:
            return done
        if not ids:
            time.sleep(poll_s)


def check(settings: Settings) -> tuple[bool, str]:
    """`broker worker --check`: whether a worker of this host (its container) is alive, by its rq
    heartbeat, a key in Redis that expires unless the worker renews it: (alive, what was found)."""
    import socket

    from redis.exceptions import RedisError
    from rq import Worker

    from broker.jobs.queue import RedisQueue

    host = socket.gethostname()
    rq_queue = RedisQueue(settings)
    try:
        workers = Worker.all(queue=rq_queue.queue)  # only workers whose heartbeat key has not expired
    except RedisError as exc:
        return False, f"Redis cannot be reached ({type(exc).__name__}: {exc})"
    finally:
        rq_queue.close()
    mine = sorted(w.name for w in workers if w.hostname == host)
    if not mine:
        return False, f"no worker on {host} has a live heartbeat on queue {settings.queue_name!r}"
    return True, f"worker(s) alive on {host}: {', '.join(mine)}"
