"""Two baselines implemented in the project, to show what the broker saves and to start the
search: greedy cheapest fit (SkyPilot-style, greedy.py) and Kubernetes-style filter/score
(kubernetes.py). `baseline_costs` prices both for a request (costs.py)."""

from broker.solver.baselines.costs import baseline_costs
from broker.solver.baselines.greedy import greedy_cheapest_fit, unshared_nodes
from broker.solver.baselines.kubernetes import kubernetes_filter_score
from broker.solver.baselines.pools import PoolArrays

__all__ = ["PoolArrays", "baseline_costs", "greedy_cheapest_fit", "kubernetes_filter_score", "unshared_nodes"]
