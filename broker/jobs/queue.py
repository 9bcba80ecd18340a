"""Where job ids wait: a Redis-backed rq queue, or a thread pool inside the API process.

rq was chosen over arq and a hand-rolled Redis list: placement jobs are synchronous,
CPU-bound solver calls, which rq runs as plain functions (arq wants coroutines and
would push them to a thread anyway); rq brings per-job timeouts, failed-job registries,
worker heartbeats and `rq info` for operators, and enqueues in about 0.3 ms
(bench/load.py --jobs measures it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from broker.errors import QueueUnavailable
from broker.jobs.store import JobStore

if TYPE_CHECKING:
    from redis import Redis
    from rq import Queue

    from broker.app import Broker
    from broker.settings import Settings

log = logging.getLogger("broker.jobs")
RUN_FUNCTION = "broker.jobs.worker.run"


class JobQueue(Protocol):
    kind: str

    def enqueue(self, job_id: str, lane: str = "") -> None:
        """Queue a stored job's id; raises QueueUnavailable when the queue cannot take it. A
        `lane` (its kind's, kinds.py) runs apart from the others where the queue has threads."""
        ...

    def ping(self) -> None:
        """Raises QueueUnavailable when the queue cannot be reached (/healthz)."""
        ...

    def depth(self) -> int: ...

    def recover(self) -> int: ...

    def close(self) -> None: ...


class InProcessQueue:
    """Jobs run on threads of the API process, `threads` per lane (one pool each, so a price
    refresh never waits behind a solve); queued jobs are re-enqueued from the DB at start."""

    kind = "in-process"

    def __init__(
        self,
        broker: Broker,
        run: Callable[[Broker, str], str],
        *,
        lanes: Mapping[str, str] | None = None,
        threads: int = 1,
    ) -> None:
        self._broker = broker
        self._run_job = run  # runner.run_job
        self._lanes = dict(lanes or {})  # job kind -> lane, for the jobs recovered at start
        self._store = JobStore(broker.sessions)
        self._threads = threads
        self._pools: dict[str, ThreadPoolExecutor] = {}

    def enqueue(self, job_id: str, lane: str = "") -> None:
        # created on first use, and again after close(): an app may be started and stopped repeatedly
        pool = self._pools.get(lane)
        if pool is None:
            prefix = f"broker-job-{lane}" if lane else "broker-job"
            pool = self._pools[lane] = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix=prefix)
        pool.submit(self._run, job_id)

    def _run(self, job_id: str) -> None:
        try:
            self._run_job(self._broker, job_id)
        except Exception:  # the pool swallows exceptions silently; log them instead
            log.exception("job %s could not be run", job_id)

    def ping(self) -> None:
        """A thread pool of this process: reachable while the process is."""

    def depth(self) -> int:
        return self._store.depth()

    def recover(self) -> int:
        jobs = self._store.pending()
        for job_id, kind in jobs:
            self.enqueue(job_id, self._lanes.get(kind, ""))
        return len(jobs)

    def close(self) -> None:
        # queued jobs stay "queued" in the database and are recovered by the next start
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.shutdown(wait=False, cancel_futures=True)


class RedisQueue:
    """An rq queue on Redis; `broker worker` processes run the jobs."""

    kind = "redis"

    def __init__(self, settings: Settings, *, connection: Redis | None = None) -> None:
        from redis import Redis
        from rq import Queue

        self.connection: Redis = connection or Redis.from_url(
            settings.redis_url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30
        )
        self.queue: Queue = Queue(settings.queue_name, connection=self.connection)
        self._timeout = max(1, int(settings.job_timeout_s))

    def enqueue(self, job_id: str, lane: str = "") -> None:
        from redis.exceptions import RedisError

        # one rq queue: each worker runs one job at a time, whatever its lane

        # the rq job id is the broker job id, so enqueueing one twice cannot create two jobs
        try:
            self.queue.enqueue_call(
                RUN_FUNCTION,
                args=(job_id,),
                job_id=job_id,
                timeout=self._timeout,
                result_ttl=86_400,
                failure_ttl=7 * 86_400,
            )
        except RedisError as exc:
            log.warning("job %s could not be queued: %s", job_id, exc)
            raise QueueUnavailable("the job queue (Redis) cannot be reached; nothing was queued, retry later") from exc

    def ping(self) -> None:
        from redis.exceptions import RedisError

        try:
            self.connection.ping()
        except RedisError as exc:
            raise QueueUnavailable(f"the job queue (Redis) cannot be reached: {type(exc).__name__}") from exc

    def depth(self) -> int:
        return int(self.queue.count)

    def recover(self) -> int:
        """Nothing to do on an API start: the jobs wait in Redis (the worker re-checks the DB)."""
        return 0

    def close(self) -> None:
        self.connection.close()


def submit(queue: JobQueue, store: JobStore, job_id: str, *, lane: str = "") -> None:
    """Queue a job just stored. When the queue cannot take it, the job is withdrawn (its row
    deleted while still `queued`), so no later start or worker runs a request whose client was
    told it failed, and QueueUnavailable (a 503) goes up. A job some runner claimed meanwhile
    (Redis took it although the answer was lost) was queued after all: it stays."""
    try:
        queue.enqueue(job_id, lane)
    except QueueUnavailable:
        if store.withdraw(job_id):
            raise
        log.info("job %s was claimed although queueing it failed; it stays", job_id)
