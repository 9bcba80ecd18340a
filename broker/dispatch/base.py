"""What every dispatcher (Kubernetes, GitOps) offers, and how it fails."""

from __future__ import annotations

from typing import Any, Protocol

from broker.dispatch.clusters import Cluster
from broker.dispatch.manifests import ClusterBundle
from broker.errors import BrokerError

FIELD_MANAGER = "placement-broker"


class ApplyFailed(BrokerError):
    """A cluster or repository refused or could not be reached; the dispatch records say which."""

    title = "Dispatch failed"

    def __init__(self, cluster: str, detail: str, *, retryable: bool = False) -> None:
        super().__init__(f"cluster {cluster!r}: {detail}", cluster=cluster)
        self.cluster = cluster
        self.retryable = retryable


class Dispatcher(Protocol):
    def apply(self, cluster: Cluster, bundle: ClusterBundle) -> dict[str, Any]:
        """Make the cluster run exactly the bundle for its app (apply, then prune what left).

        Must be idempotent: the outbox applies at least once, so a bundle may be
        applied again after a crash.
        """
        ...
