"""Every kind of job and what runs it: the one table a runner reads (runner.py).

A kind names its handler (what the job does, given the Broker and the job's stored request; its
result document), where such a job is asked for (a failed job's problem document names it as its
`instance`, so the document is the one that request would have been answered with), and what
else fails with an abandoned job of the kind. A later kind adds its row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from broker.db.service_models import JobRow
from broker.jobs import price_refresh, simulations
from broker.jobs.store import KIND_PLACEMENT
from broker.placements.documents import placement_document

if TYPE_CHECKING:
    from broker.app import Broker


def _nothing_else(s: Session, request: Any, problem: dict[str, Any], now: datetime) -> None:
    """A kind whose job keeps no state of its own beside the job row."""


@dataclass(frozen=True)
class JobKind:
    name: str
    submitted_at: str
    handler: Callable[[Broker, JobRow], dict[str, Any]]  # the job's result document
    fails_with_job: Callable[[Session, Any, dict[str, Any], datetime], None] = _nothing_else
    lane: str = ""  # jobs of one lane run apart from the others on the API process's threads

    def abandoned(self, s: Session, request: Any, problem: dict[str, Any], now: datetime) -> None:
        self.fails_with_job(s, request, problem, now)


def _place(broker: Broker, job: JobRow) -> dict[str, Any]:
    # nobody holds a connection open for a job: it gets the asynchronous cap
    placement, _stored = broker.place(job.request, tenant=job.tenant, synchronous=False)
    return placement_document(placement)


def _simulate(broker: Broker, job: JobRow) -> dict[str, Any]:
    return simulations.run_simulation_job(broker, job.request)


KINDS: dict[str, JobKind] = {
    k.name: k
    for k in (
        JobKind(KIND_PLACEMENT, "/v1/placements", _place),
        JobKind(simulations.KIND_SIMULATION, simulations.SUBMITTED_AT, _simulate, simulations.fail_with_job),
        JobKind(
            price_refresh.KIND_PRICE_REFRESH,
            price_refresh.SUBMITTED_AT,
            price_refresh.run_price_refresh,
            lane=price_refresh.LANE,
        ),
    )
}
