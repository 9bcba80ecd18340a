"""Who may make the server touch what: allow-listed roots, per-tenant work areas, the secret box.

Built once from Settings at each edge (API, CLI, worker) and handed to cluster
registration and to the dispatchers, which check a target again when they use it
(a row written before these rules, or by an operator whose roots differ from the
server's, is refused at dispatch rather than followed).

A path is judged after resolving it (symbolic links followed, `..` folded), so a
link inside a root that points outside it, or `root/../elsewhere`, is outside.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.access.secretbox import SecretBox
from broker.dispatch.addresses import IPNetwork, parse_networks
from broker.errors import InvalidRequest
from broker.settings import Settings


def _roots(raw: list[str]) -> tuple[Path, ...]:
    return tuple(Path(r).expanduser().resolve() for r in raw if r.strip())


def inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


@dataclass(frozen=True)
class TargetPolicy:
    path_roots: tuple[Path, ...]  # where the operator may name kubeconfigs and GitOps work trees
    file_repo_roots: tuple[Path, ...]  # where tenants may name file:// repositories
    data_dir: Path
    box: SecretBox
    git_timeout_s: float = 60.0
    # where tenants' repositories and API servers may resolve although not public (addresses.py)
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> TargetPolicy:
        data = settings.resolved_data_dir()
        return cls(
            # the default keeps a local run's `--kubeconfig ~/.kube/config` and scratch repos working
            path_roots=_roots(settings.server_path_roots or [str(Path.home()), tempfile.gettempdir()]),
            file_repo_roots=_roots(settings.gitops_file_roots),
            data_dir=data,
            box=SecretBox.from_settings(settings),
            git_timeout_s=settings.gitops_timeout_s,
            allowed_networks=parse_networks(settings.outbound_allowed_networks),
        )

    @property
    def workspaces(self) -> Path:
        return self.data_dir / "workspaces"

    def workspace(self, tenant: str, cluster: str) -> Path:
        """The clone of one tenant's cluster repository: <data_dir>/workspaces/<tenant>/<cluster>."""
        self.workspaces.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workspaces, 0o700)  # tenants' manifests are no business of other local users
        root = self.workspaces.resolve()
        path = (root / tenant / cluster).resolve()
        # tenant names and cluster names cannot hold "/" or start with ".", so this only fails if
        # someone replaced a folder of the work area with a link; refuse rather than follow it
        if path.parent.parent != root:
            raise InvalidRequest(f"the work area of cluster {cluster!r} is not a plain folder")
        return path

    def kube_temp_dir(self) -> Path:
        """Where the Kubernetes client writes a stored kubeconfig's certificates while it runs (0700)."""
        path = self.data_dir / "run" / "kube"
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)
        return path

    # ---- the operator's paths --------------------------------------------------------------

    def server_path(self, raw: str, loc: list[Any]) -> Path:
        """A path the operator named (CLI, or the API without a key), resolved; refused outside the roots."""
        path = Path(raw).expanduser().resolve()
        if not inside(path, self.path_roots):
            roots = ", ".join(str(r) for r in self.path_roots)
            raise InvalidRequest(
                f"{raw!r} is outside the roots the broker may use ({roots}); "
                "set BROKER_SERVER_PATH_ROOTS to allow another",
                errors=[{"loc": loc, "msg": "outside BROKER_SERVER_PATH_ROOTS"}],
            )
        return path

    def file_repo(self, raw_path: str, loc: list[Any]) -> Path:
        """The folder of a tenant's file:// repository; refused outside the file roots and inside any work area.

        Nothing here touches the file system beyond resolving links, and a path that
        fails any test gets the same message, so the answer says nothing about what exists.
        """
        refused = InvalidRequest(
            "file:// repositories must lie under a root the operator allowed for them (BROKER_GITOPS_FILE_ROOTS)",
            errors=[{"loc": loc, "msg": "not under BROKER_GITOPS_FILE_ROOTS"}],
        )
        if not self.file_repo_roots or not raw_path.startswith("/"):
            raise refused
        path = Path(raw_path).resolve()
        if not inside(path, self.file_repo_roots) or inside(path, (self.data_dir.resolve(),)):
            raise refused
        return path
