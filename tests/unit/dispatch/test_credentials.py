"""Kubeconfig checks, repository URL rules, the secret box and git's environment (no database, no network)."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from broker.access.secretbox import SecretBox, SecretUnreadable
from broker.dispatch import kubeconfig
from broker.dispatch.policy import TargetPolicy
from broker.dispatch.repos import Git, RepoUrl, check_branch, check_repo_path, parse_repo_url
from broker.errors import InvalidRequest, NotConfigured
from broker.settings import Settings

LOC = ["body", "kubeconfig_content"]
TOKEN = "s3cr3t-token-value"
KEY_DATA = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nnot really\n").decode()


def kc(**user: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "edge", "cluster": {"server": "https://10.0.0.1:6443"}}],
        "users": [{"name": "admin", "user": user or {"token": TOKEN}}],
        "contexts": [{"name": "edge", "context": {"cluster": "edge", "user": "admin"}}],
        "current-context": "edge",
    }


def problem(doc: Any, context: str | None = None, *, self_contained: bool = True) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as exc:
        kubeconfig.check(doc, context, LOC, what="kubeconfig_content", self_contained=self_contained)
    return exc.value


def test_a_self_contained_kubeconfig_passes_and_names_its_context() -> None:
    assert kubeconfig.check(kc(), None, LOC, what="x", self_contained=True) == "edge"
    both = kc(**{"client-certificate-data": KEY_DATA, "client-key-data": KEY_DATA})
    assert kubeconfig.check(both, "edge", LOC, what="x", self_contained=True) == "edge"


@pytest.mark.parametrize(
    "text",
    [
        "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",  # /etc/passwd
        "just a sentence",
        "[1, 2, 3]",
        "{}",
        "42",
    ],
)
def test_what_is_not_a_kubeconfig_gets_a_sentence_and_is_not_echoed(text: str) -> None:
    exc = problem(kubeconfig.parse_text(text, LOC, "kubeconfig_content"))
    assert "kubeconfig" in exc.detail and "item assignment" not in exc.detail
    shown = exc.detail + repr(exc.errors)
    assert "root" not in shown and "sentence" not in shown and "daemon" not in shown
    assert all(e["loc"][:2] == LOC for e in exc.errors)


def test_a_syntax_error_names_the_line_not_the_text() -> None:
    with pytest.raises(InvalidRequest) as exc:
        kubeconfig.parse_text("clusters:\n  - name: [unclosed " + TOKEN, LOC, "kubeconfig_content")
    assert "line" in exc.value.detail and TOKEN not in exc.value.detail + repr(exc.value.errors)


@pytest.mark.parametrize(
    ("user", "field"),
    [
        ({"exec": {"command": "/bin/sh", "args": ["-c", "id"]}}, "exec"),
        ({"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/sh"}}}, "auth-provider"),
        ({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "tokenFile"),
        ({"client-certificate": "/etc/ssl/cert.pem", "client-key": "/etc/ssl/key.pem"}, "client-certificate"),
        ({"client-key-data": "not base64 at all!"}, "client-key-data"),
    ],
)
def test_a_tenant_kubeconfig_may_not_run_programs_or_open_server_files(user: dict[str, Any], field: str) -> None:
    exc = problem(kc(**user))
    assert ["users", 0, "user", field] in [e["loc"][2:] for e in exc.errors]
    assert all(str(v) not in exc.detail for v in user.values())
    # the operator's own file (CLI) may use plugins and files
    if field in ("exec", "auth-provider", "tokenFile", "client-certificate"):
        assert kubeconfig.check(kc(**user), None, LOC, what="x", self_contained=False) == "edge"


def test_certificate_authority_file_and_missing_server_are_named() -> None:
    doc = kc()
    doc["clusters"][0]["cluster"] = {"certificate-authority": "/etc/shadow"}
    locs = [e["loc"][2:] for e in problem(doc).errors]
    assert ["clusters", 0, "cluster", "certificate-authority"] in locs
    assert ["clusters", 0, "cluster", "server"] in locs
    doc["clusters"][0]["cluster"] = {"server": "ftp://example.com"}
    assert "http(s) URL" in problem(doc).detail


def test_context_errors_point_at_the_context_field() -> None:
    unknown = problem(kc(), "prod")
    assert unknown.errors[0]["loc"] == ["body", "context"] and "prod" in unknown.detail
    assert "edge" not in unknown.detail  # a tenant's context names are not listed back
    no_current = kc()
    del no_current["current-context"]
    assert problem(no_current).errors[0]["loc"] == ["body", "context"]
    dangling = copy.deepcopy(kc())
    dangling["contexts"][0]["context"]["user"] = "ghost"
    assert problem(dangling).errors[0]["loc"] == [*LOC, "contexts", 0, "context", "user"]


def test_operator_files_get_the_same_checks(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(InvalidRequest) as exc:
        kubeconfig.check(kubeconfig.read_file(passwd, LOC), None, LOC, what="kubeconfig", self_contained=False)
    assert "not a kubeconfig" in exc.value.detail and "root" not in exc.value.detail
    binary = tmp_path / "blob"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InvalidRequest, match="cannot be read as text"):
        kubeconfig.read_file(binary, LOC)


# ---- secret box -------------------------------------------------------------------------------


def test_secret_box_seals_opens_and_rotates() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    sealed = SecretBox([old]).seal(TOKEN)
    assert TOKEN not in sealed and SecretBox([old]).open(sealed) == TOKEN
    both = SecretBox([new, old])  # a new key in front: old tokens still open
    assert both.open(sealed) == TOKEN
    rotated = both.rotate(sealed)
    assert SecretBox([new]).open(rotated) == TOKEN
    with pytest.raises(SecretUnreadable):
        SecretBox([new]).open(sealed)


def test_no_key_or_a_bad_key_refuses_to_seal_with_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(NotConfigured, match="BROKER_SECRET_KEY"):
        SecretBox([]).seal(TOKEN)
    with pytest.raises(NotConfigured, match="not a list of Fernet keys"):
        SecretBox(["short"]).seal(TOKEN)
    key = Fernet.generate_key().decode()
    (tmp_path / "keys").write_text(f"{key}\n")
    assert SecretBox.from_settings(Settings(secret_key_file=str(tmp_path / "keys"))).configured
    missing = SecretBox.from_settings(Settings(secret_key_file=str(tmp_path / "nope")))
    with pytest.raises(NotConfigured, match="cannot be read"):
        missing.seal(TOKEN)


# ---- repository URLs --------------------------------------------------------------------------


@pytest.fixture()
def policy(tmp_path: Path) -> TargetPolicy:
    (tmp_path / "git").mkdir()
    settings = Settings(data_dir=str(tmp_path / "data"), gitops_file_roots=[str(tmp_path / "git"), str(tmp_path)])
    return TargetPolicy.from_settings(settings)


def test_https_urls_keep_credentials_apart(policy: TargetPolicy) -> None:
    url = parse_repo_url(f"https://x-access-token:{TOKEN}@git.example.com/acme/fleet.git", policy, ["r"])
    assert url.display == "https://git.example.com/acme/fleet.git" and url.secret and TOKEN in url.secret
    plain = parse_repo_url("https://git.example.com:8443/acme/fleet.git", policy, ["r"])
    assert plain.secret is None and plain.display.endswith(":8443/acme/fleet.git")


@pytest.mark.parametrize(
    "raw",
    [
        "ssh://git@github.com/acme/fleet.git",
        "git@github.com:acme/fleet.git",
        "http://git.example.com/fleet.git",
        "ext::sh -c touch% /tmp/pwned",
        "/srv/git/fleet.git",
        "-uhttps://x",
        "https://host/fleet.git?ref=x",
        "https://exa mple.com/x",
        "file://otherhost/srv/x.git",
    ],
)
def test_other_schemes_and_odd_urls_are_refused(policy: TargetPolicy, raw: str) -> None:
    with pytest.raises(InvalidRequest) as exc:
        parse_repo_url(raw, policy, ["body", "gitops_repo"])
    assert exc.value.errors[0]["loc"] == ["body", "gitops_repo"]


def test_file_urls_only_under_the_file_roots_and_never_into_the_data_dir(policy: TargetPolicy, tmp_path: Path) -> None:
    ok = parse_repo_url((tmp_path / "git" / "fleet.git").as_uri(), policy, ["r"])
    assert ok.scheme == "file" and ok.secret is None
    outside = tmp_path.parent / "elsewhere.git"
    (tmp_path / "git" / "link.git").symlink_to(outside)
    messages = set()
    for raw in (
        outside.as_uri(),
        f"file://{tmp_path}/git/../../elsewhere.git",
        (tmp_path / "git" / "link.git").as_uri(),  # a link inside the root pointing out of it
        (tmp_path / "data" / "workspaces" / "beta" / "c0").as_uri(),  # another tenant's clone
        "file:///etc/passwd",
    ):
        with pytest.raises(InvalidRequest) as exc:
            parse_repo_url(raw, policy, ["r"])
        messages.add(exc.value.detail)
    assert len(messages) == 1  # one sentence whatever exists: nothing to learn about the disk


def test_branch_and_path_names(policy: TargetPolicy) -> None:
    assert check_branch("release/2026-12", ["b"]) == "release/2026-12"
    assert check_repo_path("/envs/prod/", ["p"]) == "envs/prod"
    for bad in ("-f", "a..b", "x.lock", "a//b", "@{u}", "/main"):
        with pytest.raises(InvalidRequest):
            check_branch(bad, ["b"])
    for bad in ("..", "a/../b", ".git", "envs/.git/hooks", "a b"):
        with pytest.raises(InvalidRequest):
            check_repo_path(bad, ["p"])


def test_git_gets_credentials_through_its_environment_only() -> None:
    secret = f"https://bot:{TOKEN}@git.example.com/acme/fleet.git"
    url = RepoUrl("https://git.example.com/acme/fleet.git", secret, "https")
    git = Git(url, timeout_s=5)
    header = base64.b64encode(f"bot:{TOKEN}".encode()).decode()
    assert f"Authorization: Basic {header}" in git.env.values()
    assert git.env["GIT_CONFIG_GLOBAL"] and git.env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert git.env["GIT_ALLOW_PROTOCOL"] == "https" and git.env["GIT_TERMINAL_PROMPT"] == "0"
    assert "SSH_AUTH_SOCK" not in git.env
    assert git.redact(f"fatal: could not read from https://bot:{TOKEN}@git.example.com") == (
        "fatal: could not read from https://bot:***@git.example.com"
    )
