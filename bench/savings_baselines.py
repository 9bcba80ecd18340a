"""What the answer's baselines cost to compute, inside the solve's time limit: the home cloud's
Kubernetes packer (the headline), the greedy and the any-site packer priced, on the generated
enterprise requests of bench/solver.py over the full public catalog. Prints one comparable
figure per line per size (median of --repeat runs), beside the packer over every allowed pool
(the search's start, which the solve already runs) as a yardstick:

    python bench/savings_baselines.py [--sizes 300,3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from solver import generate, service_problem  # bench/solver.py's request and problem

from broker.app import Broker
from broker.settings import Settings
from broker.solver.baselines.compare import baselines
from broker.solver.baselines.costs import kubernetes_packer_cost
from broker.solver.baselines.greedy import greedy_cheapest_fit
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays
from broker.solver.prepare.candidates import prepare


def _median_s(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="300,3000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    broker = Broker.open(Settings(database_url=f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"))
    broker.catalog()
    for n in (int(s) for s in args.sizes.split(",")):
        doc = generate(n)
        problem = service_problem(broker, doc)
        prep = prepare(problem)
        t = problem.table
        arrays = PoolArrays(prep.node_cost, t.vcpus, t.memory_gib, t.gpus, t.max_nodes, t.site_idx, t.cap_idx)
        greedy = greedy_cheapest_fit(prep.workloads, arrays)
        anywhere = kubernetes_filter_score(prep.workloads, arrays)
        packer_s = _median_s(lambda: kubernetes_packer_cost(problem, prep), args.repeat)  # noqa: B023
        start_s = _median_s(lambda: kubernetes_filter_score(prep.workloads, arrays), args.repeat)  # noqa: B023
        all_s = _median_s(lambda: baselines(problem, prep, greedy, anywhere, []), args.repeat)  # noqa: B023
        figures = baselines(problem, prep, greedy, anywhere, [])
        print(f"{n}.kubernetes_packer_s: {packer_s:.3f}")
        print(f"{n}.any_site_packer_start_s: {start_s:.3f}")
        print(f"{n}.all_baselines_priced_s: {all_s:.3f}")
        print(f"{n}.packer_vs_start: x{packer_s / start_s:.2f}")
        for b in figures:
            print(f"{n}.{b.policy}_cost_per_hour: {b.cost_per_hour}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
