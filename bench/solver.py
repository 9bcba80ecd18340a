"""The solver at 12 / 300 / 3,000 / 20,000 workloads over the full public catalog, side by side
with two baselines implemented in the project (per-workload cheapest fit, SkyPilot-style, and
Kubernetes-style filter/score).

Requests are generated (seeded) the way an enterprise estate looks: a few dozen t-shirt
sizes, residency policies, latency SLOs towards three user regions, spread, spot with caps,
storage and service dependencies. Prints one comparable figure per line per size:

    python bench/solver.py [--sizes 12,300,3000,20000] [--shape plain,deps] [--time-limit 30]

`--shape deps` generates the dependency-heavy enterprise shape of issue 26: about 30 % of
workloads call one service (0.1-5 GiB/h, median about 2.5), on about 800 services, and each
caller's users sit on another continent than the service's, so egress is a large share of cost.
`--requirement vcpus:Gt:1` puts that instance requirement on every workload (the request is then
solved over every pool, as the service does: Catalog.table_for). `--raw-sizes` solves over the
nodes' raw sizes, the problem as it was before allocatable capacity, for comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.app import Broker, parse_request
from broker.settings import Settings
from broker.solver import PlacementProblem, SolverOptions, solve
from broker.solver.baselines import baseline_costs
from broker.solver_runtime import solver_options

SHAPES = [  # (cpu, memory GiB): common container/VM requests
    (0.5, 1), (1, 2), (1, 4), (2, 4), (2, 8), (4, 8), (4, 16), (8, 16), (8, 32), (16, 64),
    (2, 16), (4, 32), (0.25, 0.5), (1, 1), (3, 6), (6, 24), (12, 48), (32, 128),
]  # fmt: skip
USER_REGIONS = [
    {"name": "eu-users", "lat": 50.11, "lon": 8.68},
    {"name": "us-users", "lat": 40.71, "lon": -74.0},
    {"name": "apac-users", "lat": 1.35, "lon": 103.82},
]
POLICIES = [(None, None), ("gdpr-eu", "eu-users"), ("us-only", "us-users"), ("gdpr-adequate", None),
            ("no-china", None), ("singapore-only", "apac-users"), ("germany-only", "eu-users")]  # fmt: skip
HOME_REGION = {p: r for p, r in POLICIES if p and r} | {"gdpr-adequate": "eu-users"}
CAPS = [["ondemand", "reserved"], ["ondemand", "spot"], ["spot", "ondemand", "reserved"]]


def generate(n: int, seed: int = 7) -> dict[str, Any]:
    rnd = random.Random(seed)
    workloads: list[dict[str, Any]] = []
    for i in range(n):
        cpu, mem = rnd.choice(SHAPES)
        policy, region = rnd.choices(POLICIES, weights=[30, 25, 25, 5, 10, 3, 2])[0]
        w: dict[str, Any] = {"name": f"w{i:05d}", "replicas": rnd.choice([1, 2, 2, 3, 3, 4, 6, 8, 12]),
                             "cpu": cpu, "memory_gib": mem}  # fmt: skip
        if policy:
            w["residency"] = policy
        if region and rnd.random() < 0.5:
            w["latency_slo_ms"] = {region: rnd.choice([30, 50, 80])}
        caps = rnd.choices(CAPS, weights=[60, 30, 10])[0]
        w["capacity_types"] = caps
        if "spot" in caps and rnd.random() < 0.5:
            w["max_spot_fraction"] = 0.5
        if rnd.random() < 0.25 and w["replicas"] >= 2:
            w["spread"] = {"min_sites": 2}
        if rnd.random() < 0.3:
            w["storage_gib"] = rnd.choice([20, 50, 100, 500])
            w["storage_tier"] = rnd.choice(["standard", "ssd", "premium"])
        if rnd.random() < 0.2:
            w["arch"] = ["amd64", "arm64"]
        if i > 0 and rnd.random() < 0.05:
            peer = workloads[rnd.randrange(max(0, i - 50), i)]
            if "depends_on" not in peer:
                w["depends_on"] = [{"workload": peer["name"], "gib_per_hour": rnd.choice([0.5, 1, 2, 5])}]
        if rnd.random() < 0.01:
            w.update(cpu=4, memory_gib=16, gpus=1, capacity_types=["ondemand"], arch=["amd64"])
        workloads.append(w)
    return {"name": f"bench-{n}", "user_regions": USER_REGIONS, "workloads": workloads, "dry_run": True}


def generate_dependency_heavy(n: int, seed: int = 7) -> dict[str, Any]:
    """The plain shape without its sparse dependencies, then ~30 % of workloads made callers of
    one service each. Services keep their users and SLOs; a caller's users and SLO are moved to
    another continent than its service's, so co-locating caller and service is never free."""
    req = generate(n, seed)
    rnd = random.Random(seed + 1)
    workloads = req["workloads"]
    for w in workloads:  # smaller services than the plain shape's, as in the requests
        w.pop("depends_on", None)
        w["replicas"] = max(1, w["replicas"] // 2)
        if w["replicas"] < 2:
            w.pop("spread", None)
    services = rnd.sample(range(n), k=max(1, min(800, round(n * 800 / 3000))))
    service_set = set(services)
    regions = [u["name"] for u in USER_REGIONS]
    calls = 0
    for i, w in enumerate(workloads):
        if i in service_set or rnd.random() >= 0.3 / (1 - len(services) / n + 1e-9):
            continue
        callee = workloads[services[calls % len(services)]]  # every service is called
        calls += 1
        callee_users = next(iter(callee.get("latency_slo_ms", {})), None)
        if callee_users is None:  # users where its residency lets it run, else anywhere
            callee_users = HOME_REGION.get(callee.get("residency"), rnd.choice(regions))
            callee["latency_slo_ms"] = {callee_users: rnd.choice([50, 80])}
        far = rnd.choice([r for r in regions if r != callee_users])
        w.pop("residency", None)  # a caller's own residency could forbid its far-away users
        w["latency_slo_ms"] = {far: rnd.choice([50, 80])}
        w["depends_on"] = [{"workload": callee["name"], "gib_per_hour": round(rnd.uniform(0.1, 5.0), 2)}]
    req["name"] = f"bench-deps-{n}"
    return req


def _rss_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


GENERATORS = {"plain": generate, "deps": generate_dependency_heavy}


def service_problem(broker: Broker, doc: dict[str, Any], *, raw_sizes: bool = False) -> PlacementProblem:
    """The problem as the service builds it for a request document (Broker.problem_for, the one
    builder the API uses: allocatable capacity, dominance pruning, fair share, the tenant's
    quotas and measurements, right-sizing). `raw_sizes`: the nodes' raw sizes instead (no
    reservations, no DaemonSets), the problem before allocatable capacity, for comparison only."""
    cat = broker.catalog()
    _, problem, _ = broker.problem_for(parse_request(doc), cat, tenant="default")
    return dataclasses.replace(problem, table=cat.table.compact()) if raw_sizes else problem


def run(
    broker: Broker,
    n: int,
    time_limit: float,
    *,
    shape: str = "plain",
    trace: bool = False,
    overrides: dict[str, Any] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    raw_sizes: bool = False,
) -> dict[str, Any]:
    doc = GENERATORS[shape](n)
    for w in doc["workloads"] if requirements else ():
        w["requirements"] = requirements
    req = parse_request(doc).to_domain()
    problem = service_problem(broker, doc, raw_sizes=raw_sizes)
    # timed pass without tracemalloc (it slows numpy code down): memory is the process's RSS
    # high-water mark (catalog included), and how far this solve pushed it
    options = solver_options(broker.settings)  # as the service solves: big MIPs in a child process
    options = dataclasses.replace(options, **(overrides or {}))
    rss_before = _rss_peak_mib()
    t0 = time.perf_counter()
    res = solve(problem, time_limit_s=time_limit, seed=0, options=options)
    secs = time.perf_counter() - t0
    rss_after = _rss_peak_mib()
    peak_python = float("nan")
    if trace:  # a separate, slower pass for the peak of Python/numpy allocations during the solve
        tracemalloc.start()
        solve(problem, time_limit_s=time_limit, seed=0, options=options)
        peak_python = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    base = baseline_costs(problem)
    out = {
        "workloads": n,
        "replicas": sum(w.replicas for w in req.workloads),
        "broker_cost_per_hour": res.cost_per_hour,
        "lower_bound_per_hour": res.lower_bound_per_hour,
        "gap_pct": res.gap_pct,
        "egress_per_hour": round(res.egress_cost_per_hour, 4),
        "status": res.status,
        "stop_reason": res.stop_reason,
        "nodes": sum(nd.count for nd in res.nodes),
        "nodes_before_packing": res.packing.aggregate_nodes if res.packing else float("nan"),
        # the model's answer priced by its aggregate capacity rule, before exact packing and
        # consolidation: what the search found, apart from what packing adds
        "cost_before_packing_per_hour": res.packing.aggregate_cost_per_hour if res.packing else float("nan"),
        "solve_s": round(secs, 2),
        "peak_rss_mib": round(rss_after, 1),
        "rss_growth_during_solve_mib": round(rss_after - rss_before, 1),
        "peak_python_mib": peak_python,
    }
    for name, cost in base.items():
        out[f"{name}_cost_per_hour"] = round(cost, 4) if cost is not None else float("nan")
        if cost:
            out[f"savings_vs_{name}_pct"] = round((cost - res.cost_per_hour) / cost * 100, 2)
    return out


def option_overrides(pairs: list[str]) -> dict[str, Any]:
    """FIELD=VALUE pairs as SolverOptions fields, each value read as its default's type."""
    defaults = SolverOptions()
    out: dict[str, Any] = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        if not hasattr(defaults, name):
            raise SystemExit(f"--option: SolverOptions has no field {name!r}")
        kind = type(getattr(defaults, name))
        out[name] = text.lower() in ("1", "true", "yes", "on") if kind is bool else kind(text)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="12,300,3000,20000")
    ap.add_argument("--shape", default="plain", help="comma list of plain, deps")
    ap.add_argument("--time-limit", type=float, default=0.0, help="0 = 30 s up to 3,000 workloads, else 120 s")
    ap.add_argument("--database-url", default="")
    ap.add_argument("--tracemalloc", action="store_true", help="also measure Python allocations in a second pass")
    ap.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a SolverOptions field for an A/B run, e.g. large_replica_rows=0 (repeatable)",
    )
    ap.add_argument(
        "--requirement",
        action="append",
        default=[],
        metavar="KEY:OPERATOR:VALUE[,VALUE]",
        help="an instance requirement on every workload, e.g. vcpus:Gt:1 (repeatable)",
    )
    ap.add_argument(
        "--raw-sizes",
        action="store_true",
        help="solve over the nodes' raw sizes (no reservations, no DaemonSets), as before allocatable capacity",
    )
    args = ap.parse_args()
    requirements = [
        {"key": k, "operator": op, "values": v.split(",") if v else []}
        for k, op, v in (r.split(":", 2) for r in args.requirement)
    ]
    overrides = option_overrides(args.option)
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    broker = Broker.open(Settings(database_url=url))
    broker.catalog()
    for shape in args.shape.split(","):
        prev: tuple[int, float] | None = None
        for n in (int(s) for s in args.sizes.split(",")):
            limit = args.time_limit or (30.0 if n <= 3000 else 120.0)
            row = run(
                broker,
                n,
                limit,
                shape=shape,
                trace=args.tracemalloc,
                overrides=overrides,
                requirements=requirements,
                raw_sizes=args.raw_sizes,
            )
            key = f"{n}" if shape == "plain" else f"{n}.{shape}"
            for k, v in row.items():
                print(f"{key}.{k}: {v}")
            if prev:
                ratio = row["solve_s"] / max(prev[1], 1e-3)
                print(f"{key}.solve_time_growth_vs_{prev[0]}: x{ratio:.1f} for x{n / prev[0]:.0f} workloads")
            prev = (n, float(row["solve_s"]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
