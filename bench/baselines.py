"""The named baselines on the solver bench's generated requests (bench/solver.py), side by side
with their plain per-workload versions (tests/unit/solver/baselines/reference.py, the code before
it was made cheaper), alternating in one process, and their outputs asserted identical:

    python bench/baselines.py [--sizes 300,3000] [--shape plain,deps] [--repeat 3]

Per size: the greedy and the packer over every allowed pool on the search's arrays (what
solve.search_input runs), the home cloud's packer on USD prices (what the answer's baselines
price); CPU seconds of this process (a loaded host stretches wall time, far less CPU time), the
best of --repeat runs each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.solver import GENERATORS, service_problem
from broker.app import Broker
from broker.settings import Settings
from broker.solver.baselines.costs import usd_arrays
from broker.solver.baselines.greedy import greedy_cheapest_fit
from broker.solver.baselines.home import home_workloads
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.candidates import prepare
from broker.solver.prepare.lattice import common_step, round_down
from tests.unit.solver.baselines import reference


def _cpu(f: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.process_time()
    out = f()
    return out, time.process_time() - t0


def run(broker: Broker, n: int, shape: str, repeat: int) -> dict[str, Any]:
    doc = GENERATORS[shape](n)
    problem = service_problem(broker, doc)
    t = problem.table
    prep = prepare(problem)
    wl = prep.workloads
    # the search's arrays, as solve.search_input builds them
    vcpus = round_down(t.vcpus, common_step(wd.w.cpu for wd in wl))
    mem = round_down(t.memory_gib, common_step(wd.w.memory_gib for wd in wl))
    arr = PoolArrays(prep.node_cost, vcpus, mem, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)
    usd = usd_arrays(problem)
    providers = [str(p) for p in t.site_provider]

    def home_packer(cut: Callable[..., Any], pack: Callable[..., Any]) -> Any:
        home = cut(wl, usd, providers)
        return [(w.cand.tolist(), w.rep_cost.tolist(), w.signature) for w in home], pack(home, usd)

    cases: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "greedy": (lambda: reference.greedy_cheapest_fit(wl, arr), lambda: greedy_cheapest_fit(wl, arr)),
        "packer": (lambda: reference.kubernetes_filter_score(wl, arr), lambda: kubernetes_filter_score(wl, arr)),
        "home_packer": (
            lambda: home_packer(reference.home_workloads, reference.kubernetes_filter_score),
            lambda: home_packer(home_workloads, kubernetes_filter_score),
        ),
    }
    out: dict[str, Any] = {"workloads": n, "candidate_sets": len({wd.signature for wd in wl})}
    total = [0.0, 0.0]
    for name, (before, after) in cases.items():
        best = [float("inf"), float("inf")]
        for _ in range(repeat):
            old, t_old = _cpu(before)
            new, t_new = _cpu(after)
            if new != old:
                raise SystemExit(f"{n}.{shape}.{name}: the outputs differ")
            best = [min(best[0], t_old), min(best[1], t_new)]
        out[f"{name}_cpu_s"] = f"{best[0]:.3f} -> {best[1]:.3f} (x{best[0] / best[1]:.2f}), identical"
        total = [total[0] + best[0], total[1] + best[1]]
    out["all_three_cpu_s"] = f"{total[0]:.3f} -> {total[1]:.3f} (x{total[0] / total[1]:.2f})"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="300,3000")
    ap.add_argument("--shape", default="plain,deps", help="comma list of plain, deps")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--database-url", default="")
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    broker = Broker.open(Settings(database_url=url))
    broker.catalog()
    for shape in args.shape.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            key = f"{n}" if shape == "plain" else f"{n}.{shape}"
            for k, v in run(broker, n, shape, args.repeat).items():
                print(f"{key}.{k}: {v}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
