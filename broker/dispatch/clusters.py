"""The registry of target clusters: each site maps to one or more clusters.

A cluster is reached in one of four ways. Tenants (the API with a key) give
what they own: a kubeconfig's content (stored encrypted) or a GitOps repository
URL (cloned into their own work area). The operator (CLI, or the API without a
key on a loopback-only server) may also name paths on the broker's machine: a
kubeconfig file or a git work tree, under the allow-listed roots. See
docs/dispatch.md, "Credentials and isolation".
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from broker.access.secretbox import SecretBox
from broker.db.dispatch_models import ClusterRow
from broker.db.session import transaction
from broker.dispatch import kubeconfig
from broker.dispatch.addresses import check_outbound, default_port
from broker.dispatch.documents import ClusterIn
from broker.dispatch.manifests import Target
from broker.dispatch.policy import TargetPolicy
from broker.dispatch.repos import Git, RepoUrl, check_branch, check_repo_path, parse_repo_url
from broker.errors import Conflict, Forbidden, InvalidRequest, NotFound

KUBERNETES = "kubernetes"
GITOPS = "gitops"
OPERATOR_ONLY = (
    "{field} is a path on the broker's machine, which only its operator may name "
    "(`broker clusters add`); send {instead} instead"
)


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    site: str
    kind: str  # kubernetes | gitops
    namespace: str
    kubeconfig: str | None = None  # operator's path
    context: str | None = None
    gitops_dir: str | None = None  # operator's path
    created_at: str = ""
    tenant: str = "default"
    kubeconfig_sealed: str | None = field(default=None, repr=False)  # Fernet token of the tenant's kubeconfig
    gitops_repo: str | None = None  # the URL without credentials
    gitops_repo_sealed: str | None = field(default=None, repr=False)  # Fernet token of the URL with them
    gitops_branch: str | None = None
    gitops_path: str | None = None

    @classmethod
    def from_row(cls, r: ClusterRow) -> Cluster:
        return cls(
            r.name,
            r.site,
            r.kind,
            r.namespace,
            r.kubeconfig,
            r.context,
            r.gitops_dir,
            r.created_at.isoformat(),
            r.tenant,
            r.kubeconfig_sealed,
            r.gitops_repo,
            r.gitops_repo_sealed,
            r.gitops_branch,
            r.gitops_path,
        )

    def target(self) -> Target:
        return Target(self.name, self.site, self.namespace)

    def to_json(self) -> dict[str, Any]:
        """What GET answers: never a credential, sealed or not."""
        return {
            "name": self.name,
            "site": self.site,
            "kind": self.kind,
            "namespace": self.namespace,
            "kubeconfig": self.kubeconfig,
            "kubeconfig_stored": self.kubeconfig_sealed is not None,
            "context": self.context,
            "gitops_dir": self.gitops_dir,
            "gitops_repo": self.gitops_repo,
            "gitops_branch": self.gitops_branch,
            "gitops_path": self.gitops_path,
            "created_at": self.created_at,
        }


def check_kubeconfig_file(path: Path, context: str | None, loc: list[Any]) -> None:
    """The operator's file must be a kubeconfig that has the context; the cluster is contacted at dispatch."""
    if not path.is_file():
        raise InvalidRequest(
            f"kubeconfig {str(path)!r} does not exist", errors=[{"loc": [*loc, "kubeconfig"], "msg": "no such file"}]
        )
    doc = kubeconfig.read_file(path, [*loc, "kubeconfig"])
    what = f"kubeconfig {str(path)!r}"
    kubeconfig.check(doc, context, [*loc, "kubeconfig"], what=what, self_contained=False)


def check_gitops_dir(path: Path, loc: list[Any]) -> None:
    inside = path.is_dir() and (
        subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True
        ).stdout.strip()
        == "true"
    )
    if not inside:
        raise InvalidRequest(
            f"{str(path)!r} is not a git work tree (create it with `git init`)",
            errors=[{"loc": [*loc, "gitops_dir"], "msg": "not a git work tree"}],
        )


def _refuse_paths(doc: ClusterIn, loc: list[Any]) -> None:
    for name, instead in (("kubeconfig", "kubeconfig_content"), ("gitops_dir", "gitops_repo")):
        if getattr(doc, name) is not None:
            raise Forbidden(
                OPERATOR_ONLY.format(field=name, instead=instead),
                errors=[{"loc": [*loc, name], "msg": "operator only: a path on the broker's machine"}],
            )


def _check_api_servers(doc: dict[str, Any], policy: TargetPolicy, where: list[Any]) -> None:
    """Every API server a tenant's kubeconfig names must be a public address (or operator-allowed)."""
    for i, entry in enumerate(doc.get("clusters") or []):
        server = urlsplit(str((entry.get("cluster") or {}).get("server") or ""))
        at = [*where, "clusters", i, "cluster", "server"]
        port = default_port(server.scheme, server.port)
        check_outbound(server.hostname or "", port, policy.allowed_networks, at, "kubeconfig_content")


def _check_repo_host(url: RepoUrl, policy: TargetPolicy, loc: list[Any]) -> None:
    parts = urlsplit(url.display)
    check_outbound(parts.hostname or "", default_port("https", parts.port), policy.allowed_networks, loc, "gitops_repo")


def _exists(sessions: sessionmaker[Session], tenant: str, name: str) -> None:
    with sessions() as s:
        if s.get(ClusterRow, (tenant, name)) is not None:
            raise Conflict(f"cluster {name!r} already exists")


def add_cluster(
    sessions: sessionmaker[Session],
    doc: ClusterIn,
    *,
    known_sites: Collection[str],
    policy: TargetPolicy,
    tenant: str = "default",
    operator: bool = False,
) -> Cluster:
    """Register a cluster. `operator`: the caller may name paths on the server (CLI; API without a key)."""
    loc: list[Any] = ["body"]
    if not operator:
        _refuse_paths(doc, loc)
    if doc.site not in known_sites:
        raise InvalidRequest(
            f"unknown site {doc.site!r}",
            errors=[{"loc": [*loc, "site"], "msg": f"unknown site {doc.site!r}"}],
        )
    row = ClusterRow(
        tenant=tenant,
        name=doc.name,
        site=doc.site,
        kind=GITOPS if doc.gitops_dir or doc.gitops_repo else KUBERNETES,
        namespace=doc.namespace,
        context=doc.context,
    )
    clone: Path | None = None
    if doc.kubeconfig is not None:
        path = policy.server_path(doc.kubeconfig, [*loc, "kubeconfig"])
        check_kubeconfig_file(path, doc.context, loc)
        row.kubeconfig = str(path)
    elif doc.gitops_dir is not None:
        path = policy.server_path(doc.gitops_dir, [*loc, "gitops_dir"])
        check_gitops_dir(path, loc)
        row.gitops_dir = str(path)
    elif doc.kubeconfig_content is not None:
        where = [*loc, "kubeconfig_content"]
        content = doc.kubeconfig_content
        parsed = kubeconfig.parse_text(content, where, "kubeconfig_content") if isinstance(content, str) else content
        kubeconfig.check(parsed, doc.context, where, what="kubeconfig_content", self_contained=True)
        if not operator:
            _check_api_servers(parsed, policy, where)
        row.kubeconfig_sealed = policy.box.seal(json.dumps(parsed, separators=(",", ":")))
    else:
        url = parse_repo_url(doc.gitops_repo or "", policy, [*loc, "gitops_repo"])
        if url.scheme == "https" and not operator:
            _check_repo_host(url, policy, [*loc, "gitops_repo"])
        row.gitops_repo = url.display
        row.gitops_branch = check_branch(doc.gitops_branch or "main", [*loc, "gitops_branch"])
        row.gitops_path = check_repo_path(doc.gitops_path or "", [*loc, "gitops_path"]) or None
        if url.secret is not None:
            row.gitops_repo_sealed = policy.box.seal(url.secret)
        _exists(sessions, tenant, doc.name)  # before cloning over the work area of an existing cluster
        clone = _clone(policy, tenant, doc.name, url, row.gitops_branch, loc)
    try:
        with transaction(sessions) as s:
            if s.get(ClusterRow, (tenant, doc.name)) is not None:
                raise Conflict(f"cluster {doc.name!r} already exists")
            s.add(row)
            s.flush()
            cluster = Cluster.from_row(row)
    except BaseException:
        if clone is not None:
            shutil.rmtree(clone, ignore_errors=True)
        raise
    if clone is not None:
        final = policy.workspace(tenant, doc.name)
        shutil.rmtree(final, ignore_errors=True)  # left by a crash between clone and registration
        clone.rename(final)
    return cluster


def _clone(policy: TargetPolicy, tenant: str, name: str, url: RepoUrl, branch: str, loc: list[Any]) -> Path:
    """Clone into a hidden folder beside the cluster's work area (moved into place once registered)."""
    final = policy.workspace(tenant, name)
    tmp = final.with_name(f".{name}.{secrets.token_hex(4)}")  # cluster names never start with "."
    reason = Git(url, timeout_s=policy.git_timeout_s).clone(tmp, branch)
    if reason is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InvalidRequest(
            f"gitops_repo cannot be cloned: {reason}",
            errors=[{"loc": [*loc, "gitops_repo"], "msg": f"cannot be cloned: {reason}"}],
        )
    return tmp


def list_clusters(sessions: sessionmaker[Session], *, tenant: str = "default") -> list[Cluster]:
    with sessions() as s:
        rows = s.scalars(select(ClusterRow).where(ClusterRow.tenant == tenant).order_by(ClusterRow.name))
        return [Cluster.from_row(r) for r in rows]


def get_cluster(sessions: sessionmaker[Session], name: str, *, tenant: str = "default") -> Cluster:
    with sessions() as s:
        row = s.get(ClusterRow, (tenant, name))
        if row is None:
            raise NotFound(f"cluster {name!r} does not exist")
        return Cluster.from_row(row)


def remove_cluster(
    sessions: sessionmaker[Session], name: str, *, tenant: str = "default", policy: TargetPolicy | None = None
) -> None:
    """Forget a cluster (what runs on it is left alone); the server's clone of its repository goes too."""
    with transaction(sessions) as s:
        row = s.get(ClusterRow, (tenant, name))
        if row is None:
            raise NotFound(f"cluster {name!r} does not exist")
        managed = row.gitops_repo is not None
        s.delete(row)
    if managed and policy is not None:
        shutil.rmtree(policy.workspace(tenant, name), ignore_errors=True)


def rotate_sealed(sessions: sessionmaker[Session], box: SecretBox) -> int:
    """Re-encrypt every stored credential with the box's first key, in one transaction; returns how many.

    Run after putting a new key first in BROKER_SECRET_KEY; then the old keys can go.
    A credential no configured key opens stops the whole run with nothing changed.
    """
    count = 0
    with transaction(sessions) as s:
        for row in s.scalars(
            select(ClusterRow).where(
                (ClusterRow.kubeconfig_sealed.is_not(None)) | (ClusterRow.gitops_repo_sealed.is_not(None))
            )
        ):
            if row.kubeconfig_sealed is not None:
                row.kubeconfig_sealed = box.rotate(row.kubeconfig_sealed)
                count += 1
            if row.gitops_repo_sealed is not None:
                row.gitops_repo_sealed = box.rotate(row.gitops_repo_sealed)
                count += 1
    return count
