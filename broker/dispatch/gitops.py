"""GitOps dispatcher: writes manifests into a git work tree that Argo CD or Flux syncs.

Plain `git` subprocesses rather than GitPython: GitPython shells out to the same
binary anyway, the handful of porcelain commands used here are stable, and one
dependency fewer means nothing to pin. Commits name only this cluster's folder
(`git commit -- <path>`), so unrelated staged changes in the repository are never
swept into a dispatch commit.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any, ClassVar

import yaml

from broker.dispatch.base import ApplyFailed
from broker.dispatch.clusters import Cluster
from broker.dispatch.manifests import PREFIX, ClusterBundle, dns_label, to_yaml

NAMESPACE_FILE = "_namespace.yaml"  # workload names cannot start with "_", so no file clashes
_ENV = {
    "GIT_AUTHOR_NAME": "placement-broker",
    "GIT_AUTHOR_EMAIL": "placement-broker@localhost",
    "GIT_COMMITTER_NAME": "placement-broker",
    "GIT_COMMITTER_EMAIL": "placement-broker@localhost",
}


class GitOpsDispatcher:
    _locks: ClassVar[dict[str, threading.Lock]] = {}
    _guard = threading.Lock()

    def __init__(self, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s

    def _lock(self, repo: Path) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(str(repo), threading.Lock())

    def _git(self, repo: Path, cluster: str, *args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-c", "commit.gpgsign=false", "-C", str(repo), *args],
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                env={**os.environ, **_ENV},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ApplyFailed(cluster, f"git {args[0]} failed: {exc}", retryable=True) from exc
        if done.returncode != 0:
            raise ApplyFailed(cluster, f"git {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def apply(self, cluster: Cluster, bundle: ClusterBundle) -> dict[str, Any]:
        if not cluster.gitops_dir:
            raise ApplyFailed(cluster.name, "has no gitops_dir")
        repo = Path(cluster.gitops_dir)
        if not repo.is_dir():
            raise ApplyFailed(cluster.name, f"gitops_dir {str(repo)!r} does not exist")
        rel = Path("clusters") / cluster.name / bundle.namespace
        folder = repo / rel
        with self._lock(repo):
            folder.mkdir(parents=True, exist_ok=True)
            files = self._desired_files(bundle)
            files[NAMESPACE_FILE] = to_yaml(
                [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": bundle.namespace}}]
            )
            pruned = [p.name for p in self._owned_files(folder, bundle.app) if p.name not in files]
            for name in pruned:
                (folder / name).unlink()
            for name, text in files.items():
                path = folder / name
                if not path.exists() or path.read_text() != text:
                    path.write_text(text)
            self._git(repo, cluster.name, "add", "-A", "--", str(rel))
            changed = bool(self._git(repo, cluster.name, "status", "--porcelain", "--", str(rel)).strip())
            if changed:
                message = (
                    f"placement-broker: dispatch placement {bundle.placement_id} ({bundle.app}) "
                    f"to {cluster.name}\n\n"
                    + "".join(f"{n}: {r} replicas\n" for n, r in sorted(bundle.replicas().items()))
                )
                self._git(repo, cluster.name, "commit", "-q", "-m", message, "--", str(rel))
            revision = self._git(repo, cluster.name, "rev-parse", "HEAD").strip()
            pushed = self._push(repo, cluster.name)
        return {
            "kind": "gitops",
            "revision": revision,
            "committed": changed,
            "pushed": pushed,
            "files": sorted(str(rel / n) for n in files),
            "pruned": sorted(str(rel / n) for n in pruned),
            "replicas": bundle.replicas(),
            "ready_replicas": None,  # known only once Argo CD / Flux has synced
        }

    def _push(self, repo: Path, cluster: str) -> bool:
        """Push to the branch's upstream when there is one and it is behind.

        Checked on every apply, not only after a commit, so a dispatch that committed
        and then failed to push pushes when it is resumed. A rejected push (the remote
        moved on) is rebased once onto the remote and pushed again.
        """
        upstream = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}"],
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
        )
        if upstream.returncode != 0:
            return False  # a local repository: Argo CD / Flux read it directly, or a hook pushes
        if self._git(repo, cluster, "rev-list", "--count", "@{u}..HEAD").strip() == "0":
            return False
        try:
            self._git(repo, cluster, "push", "-q")
        except ApplyFailed:
            try:
                self._git(repo, cluster, "pull", "--rebase", "-q")
                self._git(repo, cluster, "push", "-q")
            except ApplyFailed as exc:
                # committed locally; a resumed dispatch pushes it
                reason = exc.detail.split(": ", 1)[-1]
                raise ApplyFailed(cluster, f"committed but not pushed: {reason}", retryable=True) from exc
        return True

    @staticmethod
    def _desired_files(bundle: ClusterBundle) -> dict[str, str]:
        by_workload: dict[str, list[dict[str, Any]]] = {}
        for m in bundle.manifests:
            wl = m["metadata"]["annotations"][f"{PREFIX}/workload"]
            by_workload.setdefault(f"{dns_label(wl)}.yaml", []).append(m)
        return {name: to_yaml(docs) for name, docs in by_workload.items()}

    @staticmethod
    def _owned_files(folder: Path, app: str) -> list[Path]:
        """Files in the folder that hold this app's manifests (other apps' files are left alone)."""
        out = []
        for p in sorted(folder.glob("*.yaml")):
            if p.name == NAMESPACE_FILE:
                continue
            try:
                docs = [d for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)]
            except yaml.YAMLError:
                continue
            if any((d.get("metadata") or {}).get("labels", {}).get(f"{PREFIX}/app") == app for d in docs):
                out.append(p)
        return out
