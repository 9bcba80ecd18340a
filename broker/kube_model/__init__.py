"""The one model of what a team runs without the broker: kube-scheduler and the cluster autoscaler.

Pure (numpy only). Its rules are read by two drivers:

- the answer's Kubernetes baselines (broker/solver/baselines/kubernetes.py, and home.py for the
  home cloud): one static pass, pods arriving one at a time, so each scale-up is for one pending
  pod and the estimator's answer is one node;
- the fleet simulator's `kube-default` policy (broker/simulate/policies/kube.py): a cluster over
  time, pods pending in batches, nodes that start, empty and go.

`scheduler.py`: filter and LeastAllocated score, the best node. `autoscaler.py`: the price
expander, the first-fit-decreasing estimator, and the scale-down rules.
"""

from broker.kube_model.autoscaler import ScaleDown, by_price, cheapest_node_group, first_fit_decreasing, utilisation
from broker.kube_model.scheduler import EPS, fits, least_allocated, select_node

__all__ = [
    "EPS",
    "ScaleDown",
    "by_price",
    "cheapest_node_group",
    "first_fit_decreasing",
    "fits",
    "least_allocated",
    "select_node",
    "utilisation",
]
