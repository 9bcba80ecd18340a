"""Prometheus metrics and structured JSON logs with request ids.

Metrics live in the default registry. Under `uvicorn --workers N` set
PROMETHEUS_MULTIPROC_DIR so every worker process's samples are aggregated
on /metrics (prometheus-client multiprocess mode).
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar

from prometheus_client import Counter, Histogram

from broker.core.placement import Placement

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
JOBS = Counter("broker_jobs_total", "Async jobs by final status", ["status"])


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
