"""Figures per policy from a run: one summary row, and the per-step series behind the plots.

Definitions (docs/simulate.md):
- spend: node-hours at each pool's price of the moment, volumes, egress between dependent
  workloads at different sites, and each replica move at `costs.migration_per_replica`;
- utilisation: used / provisioned (billed) cores and memory, time-weighted over the run;
- starved core-minutes: per node and step, usage above the node's cores;
- unavailable replica-minutes: replicas wanted but not running (no node, or a node starting);
- SLO violations: replica-minutes served from a site beyond one of the workload's latency SLOs;
- scheduling latency: pending -> running per replica (s), and the policy's own decision time;
- fairness: weighted Jain index of the share of each tenant's CPU demand served (not starved,
  not unavailable), tenants weighted by their fleet weight: 1 when every tenant is served alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from broker.simulate.accounting import SERIES, STEP_MIN
from broker.simulate.engine import RunResult
from broker.simulate.fleet import STEP_S

SUMMARY_COLUMNS = (
    "policy",
    "spend_usd",
    "spend_per_hour_usd",
    "cpu_utilisation",
    "memory_utilisation",
    "starved_core_min",
    "starved_pct_of_used",
    "unavailable_replica_min",
    "slo_violation_replica_min",
    "spot_interruptions",
    "replicas_interrupted",
    "migrations",
    "migration_cost_usd",
    "sched_latency_p50_s",
    "sched_latency_p99_s",
    "scheduled_replicas",
    "decision_p50_ms",
    "decision_p99_ms",
    "fairness_jain",
    "nodes_mean",
)
# wall-clock figures: they vary between runs of the same seed
TIMING_COLUMNS = ("decision_p50_ms", "decision_p99_ms")


def jain(served: np.ndarray, weights: np.ndarray) -> float:
    w = np.asarray(weights, dtype=np.float64)
    x = np.asarray(served, dtype=np.float64)
    den = w.sum() * (w * x * x).sum()
    return float((w * x).sum() ** 2 / den) if den > 0 else 1.0


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def summary(run: RunResult) -> dict[str, Any]:
    s = run.ledger.series
    used_core_min = float(s["used_cpu"].sum()) * STEP_MIN
    hours = len(s["spend"]) * STEP_S / 3600.0
    spend = float(s["spend"].sum()) + run.migration_cost
    demand = run.ledger.tenant_demand
    served = np.divide(demand - run.ledger.tenant_unserved, demand, out=np.ones_like(demand), where=demand > 0)
    prov_cpu = float(s["provisioned_cpu"].sum())
    prov_mem = float(s["provisioned_memory"].sum())
    return {
        "policy": run.policy,
        "spend_usd": round(spend, 2),
        "spend_per_hour_usd": round(spend / hours, 4) if hours else 0.0,
        "cpu_utilisation": round(float(s["used_cpu"].sum()) / prov_cpu, 4) if prov_cpu else 0.0,
        "memory_utilisation": round(float(s["used_memory"].sum()) / prov_mem, 4) if prov_mem else 0.0,
        "starved_core_min": round(float(s["starved_core_min"].sum()), 2),
        "starved_pct_of_used": round(float(s["starved_core_min"].sum()) / used_core_min * 100, 4)
        if used_core_min
        else 0.0,
        "unavailable_replica_min": round(float(s["unavailable_replica_min"].sum()), 2),
        "slo_violation_replica_min": round(float(s["slo_violation_replica_min"].sum()), 2),
        "spot_interruptions": run.spot_interruptions,
        "replicas_interrupted": run.replicas_interrupted,
        "migrations": run.migrations,
        "migration_cost_usd": round(run.migration_cost, 2),
        "sched_latency_p50_s": round(_pct(run.sched_latency_s, 50), 1),
        "sched_latency_p99_s": round(_pct(run.sched_latency_s, 99), 1),
        "scheduled_replicas": len(run.sched_latency_s),
        "decision_p50_ms": round(_pct(run.decision_s, 50) * 1000, 2),
        "decision_p99_ms": round(_pct(run.decision_s, 99) * 1000, 2),
        "fairness_jain": round(jain(served, np.array(run.tenant_weights)), 4),
        "nodes_mean": round(float(s["nodes"].mean()), 2) if len(s["nodes"]) else 0.0,
    }


def summary_frame(runs: list[RunResult]) -> pd.DataFrame:
    return pd.DataFrame([summary(r) for r in runs], columns=list(SUMMARY_COLUMNS))


def series_frame(runs: list[RunResult]) -> pd.DataFrame:
    """One row per policy and step: time (hours from the start) and every per-step figure."""
    frames = []
    for r in runs:
        s = r.ledger.series
        n = len(s["spend"])
        df = pd.DataFrame({k: s[k] for k in SERIES})
        df.insert(0, "hour", np.arange(n) * STEP_S / 3600.0)
        df.insert(0, "policy", r.policy)
        df["spend_per_hour"] = df["spend"] * 3600.0 / STEP_S
        df["cpu_utilisation"] = np.divide(
            s["used_cpu"], s["provisioned_cpu"], out=np.zeros(n), where=s["provisioned_cpu"] > 0
        )
        df["memory_utilisation"] = np.divide(
            s["used_memory"], s["provisioned_memory"], out=np.zeros(n), where=s["provisioned_memory"] > 0
        )
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def events_frame(runs: list[RunResult]) -> pd.DataFrame:
    rows = [
        {"policy": r.policy, "hour": e.step * STEP_S / 3600.0, "kind": e.kind, "detail": e.detail}
        for r in runs
        for e in r.events
    ]
    return pd.DataFrame(rows, columns=["policy", "hour", "kind", "detail"])
