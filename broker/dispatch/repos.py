"""Tenants' GitOps repositories: URL rules, credentials kept out of the clone, git with a bare environment.

A tenant names a repository by URL (`https://`, or `file://` under an operator-allowed
root); the server clones it into the tenant's own work area and pushes what it
commits. Credentials in the URL (`https://user:TOKEN@host/...`) are stored sealed
and reach git only through the environment of each command (`http.extraHeader`
via GIT_CONFIG_*), never the clone's .git/config, a command line or a message.

Git runs with no system or global configuration, no terminal prompt and only the
repository's own protocol allowed, so one tenant's clone cannot borrow the server
user's credential helper, SSH agent or URL rewrites to reach another's repository.
SSH URLs are refused for that reason: they would authenticate as the server.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from broker.dispatch.policy import TargetPolicy
from broker.errors import InvalidRequest

MAX_URL = 2000
BRANCH_RE = re.compile(r"^(?!/)(?!.*//)(?!.*\.\.)(?!.*@\{)[A-Za-z0-9._/-]{1,200}(?<![/.])$")
REPO_PATH_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")


@dataclass(frozen=True, slots=True)
class RepoUrl:
    """A checked repository URL: `display` carries no credentials; `secret` is the full URL when it has any."""

    display: str
    secret: str | None
    scheme: str


def parse_repo_url(raw: str, policy: TargetPolicy, loc: list[Any]) -> RepoUrl:
    def bad(msg: str) -> InvalidRequest:
        return InvalidRequest(f"gitops_repo {msg}", errors=[{"loc": loc, "msg": msg}])

    if len(raw) > MAX_URL or any(c.isspace() or ord(c) < 32 for c in raw):
        raise bad("must be one URL without spaces or control characters")
    try:
        url = urlsplit(raw)
        host = url.hostname
        _ = url.port  # raises on a port that is not a number
    except ValueError as exc:
        raise bad("is not a URL") from exc
    if url.scheme == "file":
        if url.netloc not in ("", "localhost"):
            raise bad("a file:// URL names no host (file:///srv/git/fleet.git)")
        policy.file_repo(unquote(url.path), loc)
        return RepoUrl(urlunsplit(("file", "", url.path, "", "")), None, "file")
    if url.scheme != "https":
        raise bad("must be an https:// URL (or file:// under a root the operator allowed); ssh is not offered")
    if not host or url.query or url.fragment:
        raise bad("must be https://HOST/PATH without a query or fragment")
    bare = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
    netloc = bare if url.port is None else f"{bare}:{url.port}"
    display = urlunsplit(("https", netloc, url.path, "", ""))
    secret = raw if (url.username or url.password) else None
    return RepoUrl(display, secret, "https")


def check_branch(branch: str, loc: list[Any]) -> str:
    if not BRANCH_RE.match(branch) or branch.startswith("-") or branch.endswith(".lock"):
        raise InvalidRequest(
            f"gitops_branch {branch!r} is not a branch name", errors=[{"loc": loc, "msg": "not a branch name"}]
        )
    return branch


def check_repo_path(path: str, loc: list[Any]) -> str:
    """A folder inside the repository: relative, no `..`, no hidden parts."""
    clean = path.strip("/")
    if clean and not REPO_PATH_RE.match(clean):
        raise InvalidRequest(
            "gitops_path must be a relative folder of the repository (letters, digits, . _ - and /; no '..')",
            errors=[{"loc": loc, "msg": "not a relative folder inside the repository"}],
        )
    return clean


class Git:
    """git commands on one tenant repository, with its credentials in the environment only."""

    def __init__(self, url: RepoUrl, *, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
        env.update(
            {
                "HOME": "/nonexistent",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_ALLOW_PROTOCOL": url.scheme,
                "GIT_AUTHOR_NAME": "placement-broker",
                "GIT_AUTHOR_EMAIL": "placement-broker@localhost",
                "GIT_COMMITTER_NAME": "placement-broker",
                "GIT_COMMITTER_EMAIL": "placement-broker@localhost",
            }
        )
        # no redirects: a public host must not forward the server to an address it may not reach
        config = {"commit.gpgsign": "false", "core.hooksPath": os.devnull, "http.followRedirects": "false"}
        if url.secret is not None:
            parts = urlsplit(url.secret)
            user, password = unquote(parts.username or ""), unquote(parts.password or "")
            basic = base64.b64encode(f"{user}:{password}".encode()).decode()
            config["http.extraHeader"] = f"Authorization: Basic {basic}"
            self._hide = [s for s in (url.secret, password, basic) if s]
        else:
            self._hide = []
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for i, (k, v) in enumerate(config.items()):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
        self.env = env

    def redact(self, text: str) -> str:
        for s in self._hide:
            text = text.replace(s, "***")
        return text

    def run(self, cwd: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
        """Run git; never raises for git's own failures (the caller words the message)."""
        cmd = ["git", *(["-C", str(cwd)] if cwd is not None else []), *args]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess(cmd, 124, "", f"git {args[0]} did not finish ({type(exc).__name__})")

    def why(self, done: subprocess.CompletedProcess[str]) -> str:
        """A short, safe reason for a failed remote operation.

        For https, git's own last line with credentials removed. For file:// one fixed
        sentence: git's wording would tell a tenant which server paths exist.
        """
        if self.url.scheme == "file":
            return "the repository cannot be read or written (it may not exist, or not be a git repository)"
        lines = [ln for ln in self.redact(done.stderr).splitlines() if ln.strip()]
        return lines[-1].strip()[:300] if lines else f"git exited with {done.returncode}"

    def clone(self, dest: Path, branch: str) -> str | None:
        """Clone `branch` into dest (an empty repository is fine: the first dispatch creates the branch).

        Returns None on success, else the reason; dest is left absent on failure.
        """
        dest.parent.mkdir(parents=True, exist_ok=True)
        # the URL without credentials, so they appear in no command line and no .git/config
        done = self.run(None, "clone", "-q", "--no-checkout", "--", self.url.display, str(dest))
        if done.returncode != 0:
            return self.why(done)
        if self.run(dest, "rev-parse", "-q", "--verify", f"refs/remotes/origin/{branch}").returncode == 0:
            checkout = self.run(dest, "checkout", "-q", "-B", branch, f"origin/{branch}")
        elif self.run(dest, "for-each-ref", "--count=1", "refs/remotes/origin").stdout.strip():
            return f"the repository has no branch {branch!r}"
        else:  # an empty repository: the first dispatch makes the branch's first commit
            checkout = self.run(dest, "checkout", "-q", "--orphan", branch)
        return None if checkout.returncode == 0 else self.why(checkout)
