"""Fleet simulation bench: one figure per line per policy, and the issue's targets checked.

    python bench/simulate.py                          # the shipped fleet, its default length
    python bench/simulate.py --days 7 --out /tmp/sim  # a week, results written as CSV + Parquet
    python bench/simulate.py --scale 5000             # ~5,000 workloads made from the shipped ones
    python bench/simulate.py --scale 5000 --days 14   # the issue's scale: two weeks, start_day 0
    python bench/simulate.py --clock                  # the broker's solves on the clock, not on work limits
    python bench/simulate.py --policies kube-default,karpenter-like,broker,ppo,broker+ppo   # the learned scheduler

`--scale N` builds a bigger fleet from examples/fleet.yaml: its workloads repeated until there
are N, each copy on another trace series drawn (seeded) from the bundled traces. When the
fleet's start_day plus the days asked for run past the traces, start_day is moved earlier (to 0
at the most: the traces hold 14 days, so a 14-day replay has no history before it, and the
broker policy keeps declared requests until it has seen a day). Per policy, the replay's wall
and CPU time are printed too (`<policy> wall_s ...`), and the whole run's, child processes
(the solver's MIPs) included. Figures go to docs/simulate.md and bench/RESULTS.md with the
command, the date and the load average; none are kept in code.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.settings import Settings  # noqa: E402
from broker.simulate.fleet import STEPS_PER_DAY, parse_fleet  # noqa: E402
from broker.simulate.load import read_document, snapshot_parts, traces  # noqa: E402
from broker.simulate.metrics import SUMMARY_COLUMNS, summary  # noqa: E402
from broker.simulate.run import run_simulation  # noqa: E402
from broker.solver_runtime import solver_options  # noqa: E402
from pricing.traces import series_ids  # noqa: E402

POLICIES = ["kube-default", "cheapest-fit", "karpenter-like", "broker"]


def scaled(doc: dict[str, Any], n: int, seed: int) -> dict[str, Any]:
    """The fleet's workloads repeated up to `n`, each copy on a series drawn from the traces."""
    rng = np.random.default_rng(seed)
    ids = series_ids()
    base = doc["workloads"]
    out = copy.deepcopy(doc)
    out["name"] = f"{doc['name']}-x{n}"
    workloads = []
    for i in range(n):
        copy_no, w = divmod(i, len(base))
        w = copy.deepcopy(base[w])
        suffix = f"-c{copy_no}" if copy_no else ""
        w["name"] += suffix
        for d in w.get("depends_on", []):
            d["workload"] += suffix
        if copy_no:
            w["usage"] = {**w["usage"], "series": str(rng.choice(ids))}
        workloads.append(w)
    names = {w["name"] for w in workloads}
    for w in workloads:  # a copy whose dependency was not copied (n not a multiple) keeps none
        w["depends_on"] = [d for d in w.get("depends_on", []) if d["workload"] in names]
    out["workloads"] = workloads
    surge = out.get("events", {}).get("surge")
    if surge and surge.get("workloads"):
        wanted = {s for s in surge["workloads"]}
        surge["workloads"] = [w["name"] for w in workloads if w["name"].split("-c")[0] in wanted]
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def targets(rows: dict[str, dict[str, Any]]) -> list[str]:
    """The issue's done-when figures, each with what was measured (no tuning to them)."""
    out: list[str] = []
    b, k = rows.get("broker"), rows.get("kube-default")
    if b and k:
        spend = b["spend_usd"] / k["spend_usd"]
        util = b["cpu_utilisation"] / k["cpu_utilisation"] if k["cpu_utilisation"] else float("nan")
        out.append(f"target broker/kube-default spend_ratio {spend:.3f} (<= 0.65: {_met(spend <= 0.65)})")
        out.append(f"target broker/kube-default cpu_utilisation_ratio {util:.3f} (>= 1.27: {_met(util >= 1.27)})")
        # the issue reads utilisation as cores and memory: the memory figure beside the cores'
        # (the check above stays on cores, where the broker's bursts are)
        mem = b["memory_utilisation"] / k["memory_utilisation"] if k["memory_utilisation"] else float("nan")
        out.append(f"target broker/kube-default memory_utilisation_ratio {mem:.3f} (>= 1.27: {_met(mem >= 1.27)})")
        lat = b["sched_latency_p50_s"] < k["sched_latency_p50_s"]
        out.append(
            f"target broker/kube-default sched_latency_p50_s {b['sched_latency_p50_s']} vs {k['sched_latency_p50_s']}"
            f" (lower: {'met' if lat else 'NOT met'})"
        )
        starved = b["starved_pct_of_used"]
        out.append(f"target broker starved_pct_of_used {starved:.4f} (< 0.1: {'met' if starved < 0.1 else 'NOT met'})")
    out += learned(rows)
    for other in ("karpenter-like", "cheapest-fit"):
        o = rows.get(other)
        if b and o:
            ok = (
                b["spend_usd"] < o["spend_usd"]
                and b["starved_core_min"] <= o["starved_core_min"]
                and b["unavailable_replica_min"] <= o["unavailable_replica_min"]
            )
            out.append(
                f"target broker/{other} spend {b['spend_usd']} vs {o['spend_usd']}, starved {b['starved_core_min']} vs "
                f"{o['starved_core_min']}, unavailable {b['unavailable_replica_min']} vs {o['unavailable_replica_min']}"
                f" (lower spend, no more starved or unavailable: {'met' if ok else 'NOT met'})"
            )
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def learned(rows: dict[str, dict[str, Any]]) -> list[str]:
    """The learned scheduler's seed claims checked against kube-default (+27 % CPU utilisation,
    -42 % scheduling latency), for every policy run; and broker+ppo against broker, figure by figure."""
    out: list[str] = []
    k = rows.get("kube-default")
    for name in ("ppo", "broker+ppo", "broker"):
        r = rows.get(name)
        if not (r and k) or ("ppo" not in rows and "broker+ppo" not in rows):
            continue
        util = _ratio(r["cpu_utilisation"], k["cpu_utilisation"])
        lat = _ratio(r["sched_latency_p50_s"], k["sched_latency_p50_s"])
        out.append(f"claim {name}/kube-default cpu_utilisation_ratio {util:.3f} (+27 % claimed: {_met(util >= 1.27)})")
        out.append(
            f"claim {name}/kube-default sched_latency_p50_ratio {lat:.3f} "
            f"({r['sched_latency_p50_s']} vs {k['sched_latency_p50_s']} s; -42 % claimed: {_met(lat <= 0.58)})"
        )
    b, bp = rows.get("broker"), rows.get("broker+ppo")
    if b and bp:
        for key in (
            "spend_usd",
            "cpu_utilisation",
            "starved_core_min",
            "unavailable_replica_min",
            "sched_latency_p50_s",
            "sched_latency_p99_s",
        ):
            out.append(f"compare broker+ppo/broker {key} {bp[key]} vs {b[key]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleet", type=Path, default=ROOT / "examples" / "fleet.yaml")
    ap.add_argument("--days", type=float, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--scale", type=int, default=0, help="workloads in a scaled copy of the fleet")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--broker-time-limit", type=float, default=None, help="the broker policy's solve limit (s)")
    ap.add_argument(
        "--clock", action="store_true", help="the broker's solves on the clock (work_limits: null), not on work limits"
    )
    args = ap.parse_args()
    doc = read_document(args.fleet)
    if args.scale:
        doc = scaled(doc, args.scale, seed=args.seed or 0)
    if args.broker_time_limit is not None:
        doc.setdefault("policies", {}).setdefault("broker", {})["time_limit_s"] = args.broker_time_limit
    if args.clock:
        doc.setdefault("policies", {}).setdefault("broker", {})["work_limits"] = None
    usage = traces(doc.get("traces"), args.fleet.parent)
    days = args.days if args.days is not None else float(doc.get("days", 2))
    have = len(usage) / STEPS_PER_DAY
    doc["start_day"] = max(0, min(int(doc.get("start_day", 7)), int(have - days)))
    fleet = parse_fleet(doc)
    started = time.perf_counter()
    cpu_started = time.process_time()
    children = os.times()
    sim = run_simulation(
        fleet,
        snapshot_parts(fleet.sites),
        usage,
        policies=args.policies.split(","),
        days=args.days,
        seed=args.seed,
        solver_options=solver_options(Settings()),  # as the CLI solves: MIPs in a child held to the limit
        overhead=Settings().node_overhead(),
    )
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    after = os.times()
    child = (after.children_user - children.children_user) + (after.children_system - children.children_system)
    scenario = (
        f"{fleet.name} workloads={len(fleet.workloads)} replicas={sum(w.replicas for w in fleet.workloads)}"
        f" days={sim.days:g} start_day={fleet.start_day} seed={sim.fleet.seed}"
    )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# {scenario} wall_s={wall:.1f} cpu_s={cpu:.1f} child_cpu_s={child:.1f} load_after={load}")
    rows = {}
    for run in sim.runs:
        row = summary(run)
        rows[run.policy] = row
        for key in SUMMARY_COLUMNS[1:]:
            print(f"{run.policy} {key} {row[key]}")
        print(f"{run.policy} nodes_max {int(run.ledger.series['nodes'].max(initial=0))}")
        print(f"{run.policy} wall_s {run.wall_s:.1f}")
        print(f"{run.policy} cpu_s {run.cpu_s:.1f}")
    for line in targets(rows):
        print(line)
    if args.out is not None:
        from broker.simulate.output import write_results

        write_results(sim, args.out)


if __name__ == "__main__":
    main()
