"""The registry of target clusters: each site maps to one or more clusters."""

from __future__ import annotations

import subprocess
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from broker.db.dispatch_models import ClusterRow
from broker.db.session import transaction
from broker.dispatch.documents import ClusterIn
from broker.dispatch.manifests import Target
from broker.errors import Conflict, InvalidRequest, NotFound

KUBERNETES = "kubernetes"
GITOPS = "gitops"


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    site: str
    kind: str  # kubernetes | gitops
    namespace: str
    kubeconfig: str | None = None
    context: str | None = None
    gitops_dir: str | None = None
    created_at: str = ""

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
        )

    def target(self) -> Target:
        return Target(self.name, self.site, self.namespace)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "site": self.site,
            "kind": self.kind,
            "namespace": self.namespace,
            "kubeconfig": self.kubeconfig,
            "context": self.context,
            "gitops_dir": self.gitops_dir,
            "created_at": self.created_at,
        }


def check_kubeconfig(path: str, context: str | None, loc: list[Any]) -> None:
    """The file must be a kubeconfig that has the context; the cluster itself is contacted at dispatch."""
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    if not Path(path).is_file():
        raise InvalidRequest(
            f"kubeconfig {path!r} does not exist",
            errors=[{"loc": [*loc, "kubeconfig"], "msg": "no such file"}],
        )
    try:
        contexts, _active = kube_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, TypeError, AttributeError) as exc:
        raise InvalidRequest(
            f"kubeconfig {path!r} cannot be read: {exc}",
            errors=[{"loc": [*loc, "kubeconfig"], "msg": str(exc)}],
        ) from exc
    names = [c["name"] for c in contexts or []]
    if context is not None and context not in names:
        raise InvalidRequest(
            f"kubeconfig {path!r} has no context {context!r} (it has {names})",
            errors=[{"loc": [*loc, "context"], "msg": f"unknown context; known: {names}"}],
        )


def check_gitops_dir(path: str, loc: list[Any]) -> None:
    p = Path(path)
    inside = p.is_dir() and (
        subprocess.run(
            ["git", "-C", str(p), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True
        ).stdout.strip()
        == "true"
    )
    if not inside:
        raise InvalidRequest(
            f"{path!r} is not a git work tree (create it with `git init`)",
            errors=[{"loc": [*loc, "gitops_dir"], "msg": "not a git work tree"}],
        )


def add_cluster(
    sessions: sessionmaker[Session], doc: ClusterIn, *, known_sites: Collection[str], tenant: str = "default"
) -> Cluster:
    loc: list[Any] = ["body"]
    if doc.site not in known_sites:
        raise InvalidRequest(
            f"unknown site {doc.site!r}",
            errors=[{"loc": [*loc, "site"], "msg": f"unknown site {doc.site!r}"}],
        )
    if doc.kubeconfig is not None:
        doc = doc.model_copy(update={"kubeconfig": str(Path(doc.kubeconfig).expanduser().resolve())})
        check_kubeconfig(str(doc.kubeconfig), doc.context, loc)
    if doc.gitops_dir is not None:
        doc = doc.model_copy(update={"gitops_dir": str(Path(doc.gitops_dir).expanduser().resolve())})
        check_gitops_dir(doc.gitops_dir or "", loc)
    with transaction(sessions) as s:
        if s.get(ClusterRow, (tenant, doc.name)) is not None:
            raise Conflict(f"cluster {doc.name!r} already exists")
        row = ClusterRow(
            tenant=tenant,
            name=doc.name,
            site=doc.site,
            kind=KUBERNETES if doc.kubeconfig else GITOPS,
            namespace=doc.namespace,
            kubeconfig=doc.kubeconfig,
            context=doc.context,
            gitops_dir=doc.gitops_dir,
        )
        s.add(row)
        s.flush()
        return Cluster.from_row(row)


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


def remove_cluster(sessions: sessionmaker[Session], name: str, *, tenant: str = "default") -> None:
    with transaction(sessions) as s:
        row = s.get(ClusterRow, (tenant, name))
        if row is None:
            raise NotFound(f"cluster {name!r} does not exist")
        s.delete(row)
