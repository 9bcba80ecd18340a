"""Helpers shared by the dispatch integration tests."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from broker.app import Broker
from broker.dispatch.clusters import add_cluster
from broker.dispatch.documents import ClusterIn
from broker.dispatch.policy import TargetPolicy
from broker.placements.documents import placement_document

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def store_checkout(broker: Broker) -> dict[str, Any]:
    """The contract's example (GDPR API + database over two sites), stored; its response document."""
    doc = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    doc["dry_run"] = False
    placement, stored = broker.place(doc)
    assert stored
    return placement_document(placement)


def stored_document(broker: Broker, placement_id: str) -> dict[str, Any]:
    """GET /v1/placements/{id}'s document of a stored placement."""
    return placement_document(broker.get_placement(placement_id))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    return path


def new_remote(path: Path) -> Path:
    """An empty bare repository whose default branch is main (what a tenant's Git host offers)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "--bare", "-b", "main")
    return path


def policy(broker: Broker) -> TargetPolicy:
    return TargetPolicy.from_settings(broker.settings)


def gitops_clusters(broker: Broker, repo: Path, sites: set[str], namespace: str = "shop") -> dict[str, str]:
    """One GitOps cluster per site; returns site -> cluster name."""
    names = {}
    for site in sorted(sites):
        name = "c-" + site.replace(":", "-").replace(".", "-")
        add_cluster(
            broker.sessions,
            ClusterIn(name=name, site=site, gitops_dir=str(repo), namespace=namespace),
            known_sites=broker.catalog().sites,
            policy=policy(broker),
            operator=True,
        )
        names[site] = name
    return names


def replicas_by_workload(assignments: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for a in assignments:
        out[a["workload"]] += int(a["replicas"])
    return dict(out)


def committed_docs(repo: Path) -> dict[str, list[dict[str, Any]]]:
    """Every YAML document in the repository at HEAD, by path (what Argo CD / Flux would sync)."""
    files = git(repo, "ls-tree", "-r", "--name-only", "HEAD").split()
    return {f: [d for d in yaml.safe_load_all(git(repo, "show", f"HEAD:{f}")) if d] for f in files}
