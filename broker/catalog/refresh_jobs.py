"""Price refreshes as background jobs with a status (POST /v1/pricing/refresh).

The job's state lives in the ``pricing_jobs`` table; what runs it is a ``JobRunner``. The
in-process thread runner is enough for one API process; a queue-backed runner (e.g. the
rq queue of broker/jobs) can replace it without touching the routes or the job logic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from broker.catalog.refresh import PROVIDERS, provider_regions, refresh
from broker.db.price_models import PricingJobRow
from broker.db.session import transaction
from broker.errors import NotFound
from broker.ids import new_price_refresh_id
from broker.settings import Settings

log = logging.getLogger("broker.pricing")


class JobRunner(Protocol):
    def submit(self, job_id: str, work: Callable[[], None]) -> None: ...


class ThreadRunner:
    """One background thread for refreshes: they are I/O bound and must not overlap.

    Built by the edge that serves refreshes (create_app), which closes it on shutdown; the
    thread starts with the first refresh, and again after close(), as an app may be
    started and stopped repeatedly.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, job_id: str, work: Callable[[], None]) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="price-refresh")
        self._pool.submit(work)

    def close(self) -> None:
        # a refresh that has not started stays "queued"; POST /v1/pricing/refresh starts a new one
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def describe(row: PricingJobRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "status": row.status,
        "params": row.params,
        "result": row.result,
        "error": row.error,
        "created_at": row.created_at.isoformat(),
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }


class RefreshJobs:
    def __init__(self, factory: sessionmaker[Session], settings: Settings, runner: JobRunner) -> None:
        self._factory = factory
        self._settings = settings
        self._runner = runner

    def start(
        self, *, provider: str, regions: Sequence[str] | None = None, endpoint: str | None = None
    ) -> dict[str, Any]:
        """Validate now (bad input answers 422 at once), run later; returns the queued job."""
        for name in PROVIDERS if provider == "all" else [provider]:
            if name in PROVIDERS:
                provider_regions(self._factory, name, regions)
        params = {"provider": provider, "regions": list(regions or []), "endpoint": endpoint}
        job_id = new_price_refresh_id()
        with transaction(self._factory) as s:
            row = PricingJobRow(
                id=job_id, kind="price-refresh", status="queued", params=params, created_at=datetime.now(UTC)
            )
            s.add(row)
            doc = describe(row)
        self._runner.submit(job_id, lambda: self.run(job_id))
        return doc

    def run(self, job_id: str) -> None:
        with transaction(self._factory) as s:
            row = s.get(PricingJobRow, job_id)
            if row is None or row.status != "queued":
                return
            row.status = "running"
            params = dict(row.params)
        status, result, error = "failed", None, None
        try:
            outcomes = refresh(
                self._factory,
                self._settings,
                provider=params["provider"],
                regions=params["regions"] or None,
                endpoint=params["endpoint"],
                refresh_id=job_id,
            )
            result = {"providers": [o.as_dict() for o in outcomes]}
            failed = [o for o in outcomes if not o.ok]
            status = "failed" if failed else "succeeded"
            error = "; ".join(str(o.error) for o in failed) or None
        except Exception as exc:  # a job must end with a status, whatever broke
            log.exception("price refresh %s crashed", job_id)
            error = f"{type(exc).__name__}: {exc}"
        with transaction(self._factory) as s:
            row = s.get(PricingJobRow, job_id)
            if row is not None:
                row.status, row.result, row.error, row.finished_at = status, result, error, datetime.now(UTC)

    def get(self, job_id: str) -> dict[str, Any]:
        with self._factory() as s:
            row = s.get(PricingJobRow, job_id)
            if row is None:
                raise NotFound(f"pricing job {job_id!r} does not exist")
            return describe(row)
