"""GitOps dispatcher: writes manifests into a git work tree that Argo CD or Flux syncs.

Plain `git` subprocesses rather than GitPython: GitPython shells out to the same
binary anyway, the handful of porcelain commands used here are stable, and one
dependency fewer means nothing to pin. Commits name only this cluster's folder
(`git commit -- <path>`), so unrelated staged changes in the repository are never
swept into a dispatch commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

import yaml

from broker.dispatch.addresses import check_outbound, default_port
from broker.dispatch.base import ApplyFailed
from broker.dispatch.clusters import Cluster
from broker.dispatch.manifests import PREFIX, ClusterBundle, dns_label, to_yaml
from broker.dispatch.policy import TargetPolicy
from broker.dispatch.repos import Git, RepoUrl
from broker.errors import BrokerError, InvalidRequest

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

    def __init__(self, policy: TargetPolicy, *, timeout_s: float = 60.0) -> None:
        self.policy = policy
        self.timeout_s = timeout_s

    def _lock(self, repo: Path) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(str(repo), threading.Lock())

    def _git(self, repo: Path, cluster: str, *args: str) -> str:
        """git in the operator's work tree, with the operator's git configuration (credentials, remotes)."""
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
        if cluster.gitops_repo:
            return self._apply_managed(cluster, bundle)
        if not cluster.gitops_dir:
            raise ApplyFailed(cluster.name, "has no gitops_dir or gitops_repo")
        try:
            repo = self.policy.server_path(cluster.gitops_dir, ["gitops_dir"])
        except InvalidRequest as exc:
            raise ApplyFailed(cluster.name, exc.detail) from exc
        if not repo.is_dir():
            raise ApplyFailed(cluster.name, f"gitops_dir {str(repo)!r} does not exist")
        rel = Path("clusters") / cluster.name / bundle.namespace
        with self._lock(repo):
            files, pruned = self._write(repo, rel, cluster.name, bundle)
            self._git(repo, cluster.name, "add", "-A", "--", str(rel))
            changed = bool(self._git(repo, cluster.name, "status", "--porcelain", "--", str(rel)).strip())
            if changed:
                self._git(repo, cluster.name, "commit", "-q", "-m", _message(cluster, bundle), "--", str(rel))
            revision = self._git(repo, cluster.name, "rev-parse", "HEAD").strip()
            pushed = self._push(repo, cluster.name)
        return _result(revision, changed, pushed, rel, files, pruned, bundle)

    def _apply_managed(self, cluster: Cluster, bundle: ClusterBundle) -> dict[str, Any]:
        """A tenant's repository: the server's clone in the tenant's work area, reset to the remote, pushed."""
        try:
            secret = self.policy.box.open(cluster.gitops_repo_sealed) if cluster.gitops_repo_sealed else None
            url = RepoUrl(cluster.gitops_repo or "", secret, urlsplit(cluster.gitops_repo or "").scheme)
            if url.scheme == "file":  # the operator may have narrowed the roots since registration
                self.policy.file_repo(unquote(urlsplit(url.display).path), ["gitops_repo"])
            else:  # and a repository's host may resolve elsewhere now than at registration
                parts = urlsplit(url.display)
                port = default_port("https", parts.port)
                check_outbound(parts.hostname or "", port, self.policy.allowed_networks, ["gitops_repo"], "gitops_repo")
            work = self.policy.workspace(cluster.tenant, cluster.name)
        except BrokerError as exc:
            raise ApplyFailed(cluster.name, exc.detail) from exc
        git = Git(url, timeout_s=self.timeout_s)
        branch = cluster.gitops_branch or "main"
        rel = Path(cluster.gitops_path or ".") / "clusters" / cluster.name / bundle.namespace

        def run(*args: str, remote: bool = False) -> str:
            done = git.run(work, *args)
            if done.returncode != 0:
                why = git.why(done) if remote else git.redact(done.stderr.strip())[:300]
                raise ApplyFailed(cluster.name, f"git {args[0]} failed: {why}", retryable=remote)
            return done.stdout

        with self._lock(work):
            if not (work / ".git").is_dir():
                shutil.rmtree(work, ignore_errors=True)
                reason = git.clone(work, branch)
                if reason is not None:
                    shutil.rmtree(work, ignore_errors=True)
                    raise ApplyFailed(cluster.name, f"gitops_repo cannot be cloned: {reason}", retryable=True)
            for attempt in (1, 2):
                run("fetch", "-q", "--prune", "origin", remote=True)
                remote_ref = f"refs/remotes/origin/{branch}"
                remote_head = git.run(work, "rev-parse", "-q", "--verify", remote_ref).stdout.strip()
                if remote_head:
                    # the server's clone holds nothing of its own: start from the remote every time
                    run("checkout", "-q", "-f", "-B", branch, f"origin/{branch}")
                files, pruned = self._write(work, rel, cluster.name, bundle)
                run("add", "-A", "--", str(rel))
                changed = bool(run("status", "--porcelain", "--", str(rel)).strip())
                if changed:
                    run("commit", "-q", "-m", _message(cluster, bundle), "--", str(rel))
                revision = run("rev-parse", "HEAD").strip()
                pushed = revision != remote_head  # a commit of an earlier try is owed too
                if not pushed:
                    break
                done = git.run(work, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
                if done.returncode == 0:
                    break
                if attempt == 2:  # rejected twice, or the remote is unreachable
                    raise ApplyFailed(cluster.name, f"committed but not pushed: {git.why(done)}", retryable=True)
                # rejected: the remote moved on; write onto its new head once more
        return _result(revision, changed, pushed, rel, files, pruned, bundle)

    def _write(self, repo: Path, rel: Path, cluster: str, bundle: ClusterBundle) -> tuple[dict[str, str], list[str]]:
        """Write the bundle's files into repo/rel and remove this app's files that left; returns (files, pruned)."""
        folder = _real_folder(repo, rel, cluster)
        files = self._desired_files(bundle)
        files[NAMESPACE_FILE] = to_yaml(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": bundle.namespace}}]
        )
        pruned = [p.name for p in self._owned_files(folder, bundle.app) if p.name not in files]
        for name in pruned:
            (folder / name).unlink()
        for name, text in files.items():
            path = folder / name
            if path.is_symlink() or (path.exists() and not path.is_file()):
                # a link in the repository would have the server write wherever it points
                raise ApplyFailed(cluster, f"{rel / name} in the repository is not a plain file")
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
        return files, pruned

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
            if p.name == NAMESPACE_FILE or p.is_symlink() or not p.is_file():
                continue
            try:
                docs = [d for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)]
            except yaml.YAMLError:
                continue
            if any((d.get("metadata") or {}).get("labels", {}).get(f"{PREFIX}/app") == app for d in docs):
                out.append(p)
        return out


def _real_folder(repo: Path, rel: Path, cluster: str) -> Path:
    """repo/rel, created as needed; refused if any part of it is a link or a file.

    A repository (a tenant's above all) can hold a symbolic link where the broker
    writes; following it would put files outside the repository.
    """
    folder = repo
    for part in rel.parts:
        if part in ("", "."):
            continue
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise ApplyFailed(cluster, f"{folder.relative_to(repo)} in the repository is not a plain folder")
        folder.mkdir(exist_ok=True)
    return folder


def _message(cluster: Cluster, bundle: ClusterBundle) -> str:
    return f"placement-broker: dispatch placement {bundle.placement_id} ({bundle.app}) to {cluster.name}\n\n" + "".join(
        f"{n}: {r} replicas\n" for n, r in sorted(bundle.replicas().items())
    )


def _result(
    revision: str,
    changed: bool,
    pushed: bool,
    rel: Path,
    files: dict[str, str],
    pruned: list[str],
    bundle: ClusterBundle,
) -> dict[str, Any]:
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
