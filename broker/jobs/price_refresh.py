"""Price refreshes as jobs (POST /v1/pricing/refresh): a job of kind "price-refresh".

Validated when asked for (bad input answers 422 at once), run later by the one job mechanism
(kinds.py, runner.py) on its own lane: refreshes are I/O bound, must not overlap, and must not
wait behind solves on the API process's threads. `GET /v1/pricing/jobs/{id}` answers the job in
the pricing document's shape (`params`, `error` as the failure's one-line detail).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session, sessionmaker

from broker.catalog.refresh import PROVIDERS, provider_regions, refresh
from broker.db.service_models import JobRow
from broker.errors import NotFound, PricingUnavailable
from broker.jobs.queue import JobQueue, submit
from broker.jobs.store import FailedWithResult, JobStore

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger("broker.pricing")

KIND_PRICE_REFRESH = "price-refresh"
LANE = "price-refresh"
SUBMITTED_AT = "/v1/pricing/refresh"


def pricing_document(row: JobRow) -> dict[str, Any]:
    """The job as the pricing API answers it."""
    error = row.error.get("detail") if isinstance(row.error, dict) else row.error
    return {
        "id": row.id,
        "kind": row.kind,
        "status": row.status,
        "params": row.request,
        "result": row.result,
        "error": error,
        "created_at": row.created_at.isoformat(),
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }


class PriceRefreshJobs:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def start(
        self,
        queue: JobQueue,
        *,
        tenant: str,
        provider: str,
        regions: Sequence[str] | None = None,
        endpoint: str | None = None,
    ) -> dict[str, Any]:
        """Validate now, queue the job; returns it as queued."""
        for name in PROVIDERS if provider == "all" else [provider]:
            if name in PROVIDERS:
                provider_regions(self._sessions, name, regions)
        params = {"provider": provider, "regions": list(regions or []), "endpoint": endpoint}
        store = JobStore(self._sessions)
        job = store.create(tenant=tenant, request=params, kind=KIND_PRICE_REFRESH)
        submit(queue, store, job["id"], lane=LANE)
        return self.get(job["id"], queued=job)

    def get(self, job_id: str, *, queued: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._sessions() as s:
            row = s.get(JobRow, job_id)
            if row is None or row.kind != KIND_PRICE_REFRESH:
                raise NotFound(f"pricing job {job_id!r} does not exist")
            doc = pricing_document(row)
        if queued is not None:  # as created: a runner may have claimed it since
            doc["status"], doc["result"], doc["error"], doc["finished_at"] = "queued", None, None, None
        return doc


def run_price_refresh(broker: Broker, row: JobRow) -> dict[str, Any]:
    """What a job of kind "price-refresh" does: refresh the providers' prices (each provider in
    one transaction; a failed one keeps its last good prices). The job fails when any provider
    failed, with every provider's outcome as its result."""
    params = dict(row.request)
    outcomes = refresh(
        broker.sessions,
        broker.settings,
        provider=params["provider"],
        regions=params["regions"] or None,
        endpoint=params["endpoint"],
        refresh_id=row.id,
    )
    result = {"providers": [o.as_dict() for o in outcomes]}
    failed = [o for o in outcomes if not o.ok]
    if failed:
        detail = "; ".join(str(o.error) for o in failed)
        raise FailedWithResult(PricingUnavailable(str(params["provider"]), detail=detail), result)
    return result
