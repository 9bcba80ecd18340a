"""Prometheus metrics and structured JSON logs with request ids.

Metrics live in the default registry. Under `uvicorn --workers N` set
PROMETHEUS_MULTIPROC_DIR so every worker process's samples are aggregated
on /metrics (prometheus-client multiprocess mode). What a job did is read from
the database at scrape time (`StoredFigures`): a job may run on a `broker worker`
that serves no metrics, on another machine.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.core.placement import Placement

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger("broker.metrics")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
if os.environ.get(MULTIPROC_ENV):
    # every process of the image has the variable (the worker and the CLI too); the samples of one
    # that serves no /metrics go nowhere, but without the directory it could not even start
    Path(os.environ[MULTIPROC_ENV]).mkdir(parents=True, exist_ok=True)

request_id: ContextVar[str] = ContextVar("request_id", default="-")
tenant_var: ContextVar[str] = ContextVar("tenant", default="-")

REQUEST_SECONDS = Histogram(
    "broker_http_request_duration_seconds",
    "HTTP request latency by route template, method and status",
    ["method", "route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120),
)
SOLVE_SECONDS = Histogram(
    "broker_solve_duration_seconds",
    "Solver wall time per placement",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 120, 600),
)
# Counters count what this server did since it started (summed over its worker processes in
# multiprocess mode), not the database's contents: totals over stored placements, whoever
# stored them and whenever, are the savings ledger's (GET /v1/savings).
PLACEMENTS = Counter(
    "broker_placements_total", "Placements answered by this server since it started", ["status", "stored"]
)
SAVINGS = Counter(
    "broker_savings_usd_per_hour_total",
    "Headline baseline cost (kubernetes-packer, or the placement in force for a re-plan) minus placed cost "
    "(USD per hour), summed over the placements this server stored since it started; totals over all stored "
    "placements: GET /v1/savings",
)
COST = Counter(
    "broker_placed_cost_usd_per_hour_total",
    "Cost per hour (USD) summed over the placements this server stored since it started; totals over all "
    "stored placements: GET /v1/savings",
)
OVER_BUDGET = Counter("broker_over_budget_total", "Placements refused because a budget would be exceeded")
RATE_LIMITED = Counter("broker_rate_limited_total", "Requests refused by the per-key rate limit")
JOB_STATUSES_FINISHED = ("succeeded", "failed")


class StoredFigures:
    """Figures read from the database at each scrape, so they count what every process did: the
    jobs a `broker worker` ran (on this machine or another) as well as the API's own. Every API
    replica reports the same values (aggregate them with max, not sum). One GROUP BY over the
    jobs table's (status, kind) index; a database that does not answer leaves them out."""

    def __init__(self, sessions: sessionmaker[Session], queue_depth: Callable[[], float]) -> None:
        self._sessions = sessions
        self._queue_depth = queue_depth

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("broker_job_queue_depth", "Jobs waiting to run")
        depth.add_metric([], self._queue_depth())
        yield depth
        try:
            counts = job_counts(self._sessions)
        except Exception:  # a scrape must not fail because the database is unreachable
            log.warning("job counts unavailable for /metrics", exc_info=True)
            return
        finished = CounterMetricFamily(
            "broker_jobs",
            "Async jobs (placements, simulations) finished by kind and final status, whichever process ran "
            "them: the jobs table's count, not this server's",
            labels=["kind", "status"],
        )
        unfinished = GaugeMetricFamily(
            "broker_jobs_unfinished", "Async jobs queued or running now, by kind", labels=["kind", "status"]
        )
        for (kind, status), n in sorted(counts.items()):
            (finished if status in JOB_STATUSES_FINISHED else unfinished).add_metric([kind, status], n)
        yield finished
        yield unfinished


def job_counts(sessions: sessionmaker[Session]) -> dict[tuple[str, str], int]:
    """Jobs in the database by (kind, status)."""
    from sqlalchemy import func, select

    from broker.db.service_models import JobRow

    with sessions() as s:
        rows = s.execute(select(JobRow.kind, JobRow.status, func.count()).group_by(JobRow.status, JobRow.kind))
        return {(str(kind), str(status)): int(n) for kind, status, n in rows}


def clear_multiprocess_dir(*, keep_pid: int | None = None) -> int:
    """Remove the sample files earlier processes left in PROMETHEUS_MULTIPROC_DIR (prometheus-client:
    wipe the directory between runs, before the server starts), so a restarted server's counters
    start at zero. Only for the process that starts the server, before its workers exist: one
    worker clearing it would delete its siblings' live samples. `keep_pid`: this process's own
    files (it may have samples already). Returns the number of files removed."""
    where = os.environ.get(MULTIPROC_ENV)
    if not where or not Path(where).is_dir():
        return 0
    removed = 0
    for f in Path(where).glob("*.db"):
        if keep_pid is not None and f.stem.rsplit("_", 1)[-1] == str(keep_pid):
            continue
        f.unlink(missing_ok=True)
        removed += 1
    return removed


def observe_placement(p: Placement, *, stored: bool) -> None:
    r = p.result
    SOLVE_SECONDS.observe(r.solve_ms / 1000.0)
    PLACEMENTS.labels(status=r.status, stored=str(stored).lower()).inc()
    if stored:
        cost = r.cost_per_hour
        COST.inc(max(cost, 0.0))
        base = r.baseline.cost_per_hour
        if base is not None and base > cost:
            SAVINGS.inc(base - cost)


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        if not hasattr(record, "tenant"):
            record.tenant = tenant_var.get()
        return True


def configure_logging(fmt: str = "json", level: int = logging.INFO) -> None:
    """One handler on the root logger: JSON lines (with request_id and tenant) or plain text."""
    root = logging.getLogger()
    if any(getattr(h, "_broker", False) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler._broker = True  # type: ignore[attr-defined]
    handler.addFilter(_ContextFilter())
    if fmt == "json":
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(tenant)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
