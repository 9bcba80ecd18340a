"""Who may touch what on the server (issue 28 §3): tenants' clusters through the API with keys.

Tenants register clusters with what they own — a kubeconfig's content (stored
encrypted) or a GitOps repository URL (cloned into their own work area) — and
cannot make the server read or write anywhere else: not by path, `..` or a
symbolic link, and not with another tenant's credentials.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient
from sqlalchemy import text

from broker.app import Broker
from tests.integration.dispatch_support import committed_docs, git, new_remote
from tests.integration.kube_fake import FakeKube, serve_fake_kube, write_kubeconfig
from tests.integration.service_support import key, open_broker, service_client, small_request

PROBLEM = "application/problem+json"
TOKEN = "tenant-alpha-bearer-token-7f3a"
KEY = Fernet.generate_key().decode()


def kubeconfig(server: str, token: str = TOKEN, context: str = "edge") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": "admin"}}],
        "current-context": context,
    }


@dataclass
class Service:
    c: TestClient
    broker: Broker
    alpha: dict[str, str]
    beta: dict[str, str]
    remotes: Path  # BROKER_GITOPS_FILE_ROOTS
    data: Path  # BROKER_DATA_DIR
    operator: Path  # BROKER_SERVER_PATH_ROOTS
    outside: Path  # a folder no root covers

    def placement(self, h: dict[str, str], name: str) -> dict[str, Any]:
        r = self.c.post("/v1/placements", json=small_request(name), headers=h)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def cluster(self, h: dict[str, str], name: str, site: str, **target: Any) -> Any:
        return self.c.post("/v1/clusters", json={"name": name, "site": site, "namespace": "shop", **target}, headers=h)


def _service(db_url: str, tmp_path: Path, **settings: Any) -> Iterator[Service]:
    dirs = {n: tmp_path / n for n in ("remotes", "data", "operator", "outside")}
    for d in dirs.values():
        d.mkdir()
    # the fake API servers here listen on loopback: the operator allows it (test_dispatch_ssrf.py: not)
    settings.setdefault("outbound_allowed_networks", ["127.0.0.0/8"])
    b = open_broker(
        db_url,
        auth="required",
        gitops_file_roots=[str(dirs["remotes"])],
        data_dir=str(dirs["data"]),
        server_path_roots=[str(dirs["operator"])],
        **settings,
    )
    with service_client(b) as c:
        yield Service(c, b, key(b, "alpha"), key(b, "beta"), **dirs)
    b.engine.dispose()


@pytest.fixture()
def svc(db_url: str, tmp_path: Path) -> Iterator[Service]:
    # the fake API servers and remotes here listen on loopback: the operator allows it
    yield from _service(db_url, tmp_path, secret_key=KEY)


def _sites(placement: dict[str, Any]) -> list[str]:
    return sorted({a["site"] for a in placement["assignments"]})


# ---- paths on the server ----------------------------------------------------------------------


def test_tenants_cannot_name_paths_on_the_server(svc: Service) -> None:
    real = write_kubeconfig(svc.operator / "kc.yaml", "http://127.0.0.1:9")
    repo = svc.operator / "fleet"
    repo.mkdir()
    git(repo, "init", "-q")
    answers = {}
    for field, path in [
        ("kubeconfig", str(real)),  # exists, under the operator's roots
        ("kubeconfig", "/etc/passwd"),
        ("kubeconfig", "/nonexistent/kc"),
        ("kubeconfig", f"{svc.operator}/../outside/kc"),
        ("gitops_dir", str(repo)),
        ("gitops_dir", "/etc"),
        ("gitops_dir", "/nonexistent/repo"),
    ]:
        r = svc.cluster(svc.alpha, "c", "aws:eu-central-1", **{field: path})  # an admin key, even
        assert r.status_code == 403 and r.headers["content-type"] == PROBLEM, r.text
        body = r.json()
        assert body["errors"][0]["loc"] == ["body", field] and "operator" in body["detail"]
        answers.setdefault(field, set()).add(body["detail"])
    # the same answer whether the path exists or not: nothing is opened to tell them apart
    assert all(len(details) == 1 for details in answers.values())
    assert svc.c.get("/v1/clusters", headers=svc.alpha).json() == []


# ---- kubeconfig content -----------------------------------------------------------------------


@pytest.mark.both_backends
def test_kubeconfig_content_is_stored_encrypted_and_never_returned_or_logged(
    svc: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = "http://127.0.0.1:9"
    r = svc.cluster(svc.alpha, "edge", "aws:eu-central-1", kubeconfig_content=json.dumps(kubeconfig(server)))
    assert r.status_code == 201, r.text
    as_yaml = "\n".join(
        [
            "apiVersion: v1",
            "kind: Config",
            f"clusters: [{{name: e2, cluster: {{server: '{server}'}}}}]",
            f"users: [{{name: u, user: {{token: {TOKEN}}}}}]",
            "contexts: [{name: e2, context: {cluster: e2, user: u}}]",
        ]
    )
    r2 = svc.cluster(svc.alpha, "edge-2", "aws:eu-central-1", kubeconfig_content=as_yaml, context="e2")
    assert r2.status_code == 201, r2.text
    shown = [
        r.json(),
        r2.json(),
        svc.c.get("/v1/clusters", headers=svc.alpha).json(),
        svc.c.get("/v1/clusters/edge", headers=svc.alpha).json(),
    ]
    assert TOKEN not in json.dumps(shown) and server not in json.dumps(shown)
    assert shown[3]["kubeconfig_stored"] is True and shown[3]["kubeconfig"] is None and shown[3]["kind"] == "kubernetes"

    with svc.broker.engine.connect() as conn:
        rows = conn.execute(text("select * from dispatch_clusters")).mappings().all()
    assert len(rows) == 2
    dumped = json.dumps([dict(r) for r in rows], default=str)
    assert TOKEN not in dumped and server not in dumped  # the column holds ciphertext only
    sealed = next(r["kubeconfig_sealed"] for r in rows if r["name"] == "edge")
    assert json.loads(Fernet(KEY.encode()).decrypt(sealed.encode()))["users"][0]["user"]["token"] == TOKEN
    logged = "\n".join(f"{rec.getMessage()} {rec.__dict__}" for rec in caplog.records)
    assert TOKEN not in logged


@pytest.mark.parametrize(
    ("content", "loc", "words"),
    [
        ("root:x:0:0:root:/root:/bin/bash\nbin:x:1:1:bin:/bin:/sbin/nologin\n", [], "not a kubeconfig"),
        ("{unclosed: [", [], "not valid YAML or JSON"),
        ({"clusters": [], "contexts": [], "users": []}, ["clusters"], "non-empty list"),
        (
            {**kubeconfig("http://127.0.0.1:9"), "users": [{"name": "admin", "user": {"exec": {"command": "id"}}}]},
            ["users", 0, "user", "exec"],
            "run programs",
        ),
        (
            {**kubeconfig("http://127.0.0.1:9"), "users": [{"name": "admin", "user": {"tokenFile": "/etc/shadow"}}]},
            ["users", 0, "user", "tokenFile"],
            "path on the server",
        ),
        (
            {**kubeconfig("http://127.0.0.1:9"), "clusters": [{"name": "edge", "cluster": {}}]},
            ["clusters", 0, "cluster", "server"],
            "no server URL",
        ),
    ],
)
def test_bad_kubeconfig_content_gets_a_sentence_naming_the_field(
    svc: Service, content: Any, loc: list[Any], words: str
) -> None:
    r = svc.cluster(svc.alpha, "edge", "aws:eu-central-1", kubeconfig_content=content)
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
    body = r.json()
    assert words in body["detail"] and "item assignment" not in body["detail"]
    assert body["errors"][0]["loc"] == ["body", "kubeconfig_content", *loc]
    for secret in ("root:x", "/etc/shadow", "/bin/bash"):
        assert secret not in json.dumps(body)
    unknown = svc.cluster(
        svc.alpha, "edge", "aws:eu-central-1", kubeconfig_content=kubeconfig("http://127.0.0.1:9"), context="prod"
    )
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["loc"] == ["body", "context"]
    assert svc.c.get("/v1/clusters", headers=svc.alpha).json() == []


def test_without_a_secret_key_credentials_are_refused(db_url: str, tmp_path: Path) -> None:
    for s in _service(db_url, tmp_path):
        r = s.cluster(s.alpha, "edge", "aws:eu-central-1", kubeconfig_content=kubeconfig("http://127.0.0.1:9"))
        assert r.status_code == 503 and r.json()["type"].endswith("/not-configured"), r.text
        assert "BROKER_SECRET_KEY" in r.json()["detail"]
        assert s.c.get("/v1/clusters", headers=s.alpha).json() == []
        # a repository without credentials needs no key
        remote = new_remote(s.remotes / "fleet.git")
        assert s.cluster(s.alpha, "g", "aws:eu-central-1", gitops_repo=remote.as_uri()).status_code == 201


@pytest.mark.both_backends
def test_each_tenant_dispatches_with_its_own_credentials_only(svc: Service) -> None:
    a_plan, b_plan = svc.placement(svc.alpha, "a-plan"), svc.placement(svc.beta, "b-plan")
    assert svc.c.post(f"/v1/placements/{b_plan['id']}/dispatch", json={}, headers=svc.beta).status_code == 422
    with ExitStack() as stack:
        kubes: dict[str, list[FakeKube]] = {"alpha": [], "beta": []}
        for tenant, h, plan in (("alpha", svc.alpha, a_plan), ("beta", svc.beta, b_plan)):
            for i, site in enumerate(_sites(plan)):
                kube, url = stack.enter_context(serve_fake_kube())
                body = kubeconfig(url, token=f"{tenant}-token")
                assert svc.cluster(h, f"k{i}", site, kubeconfig_content=body).status_code == 201
                kubes[tenant].append(kube)
        # beta's clusters have the same names as alpha's; beta cannot reach alpha's placement
        assert svc.c.post(f"/v1/placements/{a_plan['id']}/dispatch", json={}, headers=svc.beta).status_code == 404
        assert all(not k.requests for k in kubes["alpha"] + kubes["beta"])

        doc = svc.c.post(f"/v1/placements/{b_plan['id']}/dispatch", json={}, headers=svc.beta).json()
        assert doc["state"] == "applied", doc
        assert all(not k.requests for k in kubes["alpha"])  # beta's dispatch never touched alpha's clusters
        assert sum(sum(k.replicas().values()) for k in kubes["beta"]) == 2
        doc = svc.c.post(f"/v1/placements/{a_plan['id']}/dispatch", json={}, headers=svc.alpha).json()
        assert doc["state"] == "applied", doc
        assert sum(sum(k.replicas().values()) for k in kubes["alpha"]) == 2
        assert TOKEN not in json.dumps(doc)


# ---- GitOps repositories ----------------------------------------------------------------------


def test_gitops_repo_is_cloned_into_the_tenants_area_and_pushed(svc: Service) -> None:
    plan = svc.placement(svc.alpha, "a-plan")
    remote = new_remote(svc.remotes / "alpha.git")
    for i, site in enumerate(_sites(plan)):
        r = svc.cluster(svc.alpha, f"g{i}", site, gitops_repo=remote.as_uri(), gitops_path="envs/prod")
        assert r.status_code == 201, r.text
        assert r.json()["gitops_repo"] == remote.as_uri() and r.json()["gitops_branch"] == "main"
        assert (svc.data / "workspaces" / "alpha" / f"g{i}" / ".git").is_dir()
    doc = svc.c.post(f"/v1/placements/{plan['id']}/dispatch", json={}, headers=svc.alpha).json()
    assert doc["state"] == "applied" and all(c["result"]["pushed"] for c in doc["clusters"]), doc
    files = committed_docs(remote)  # what Argo CD / Flux would sync from the tenant's repository
    assert files and all(f.startswith("envs/prod/clusters/g") for f in files)
    replicas = sum(d["spec"]["replicas"] for docs in files.values() for d in docs if d["kind"] == "Deployment")
    assert replicas == 2

    # another commit lands on the remote meanwhile: the next dispatch writes on top of it
    other = svc.outside / "clone"
    git(svc.outside, "clone", "-q", str(remote), str(other))
    (other / "README").write_text("fleet\n")
    git(other, "add", "README")
    git(other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "readme")
    git(other, "push", "-q", "origin", "main")
    moved = svc.c.post(f"/v1/placements/{plan['id']}/replan", json={"replicas": {"api": 3}}, headers=svc.alpha)
    new_id = moved.json()["new_placement_id"]
    again = svc.c.post(f"/v1/placements/{new_id}/dispatch", json={}, headers=svc.alpha).json()
    assert again["state"] == "applied", again
    assert "README" in committed_docs(remote) or "README" in git(remote, "ls-tree", "--name-only", "HEAD")

    # removing the cluster removes the server's clone
    assert svc.c.delete("/v1/clusters/g0", headers=svc.alpha).status_code == 204
    assert not (svc.data / "workspaces" / "alpha" / "g0").exists()


def test_tenants_cannot_reach_outside_their_area_through_repository_urls(svc: Service) -> None:
    alpha_remote = new_remote(svc.remotes / "alpha.git")
    assert svc.cluster(svc.alpha, "g0", "aws:eu-central-1", gitops_repo=alpha_remote.as_uri()).status_code == 201
    secret_repo = new_remote(svc.outside / "secret.git")
    (svc.remotes / "link.git").symlink_to(secret_repo)
    refused = {}
    for name, url in {
        "outside": secret_repo.as_uri(),
        "dotdot": f"file://{svc.remotes}/../outside/secret.git",
        "symlink": (svc.remotes / "link.git").as_uri(),
        "workspace": (svc.data / "workspaces" / "alpha" / "g0").as_uri(),
        "missing": f"file://{svc.outside}/nothing-here.git",
        "etc": "file:///etc",
        "ssh": "ssh://git@127.0.0.1/fleet.git",
    }.items():
        r = svc.cluster(svc.beta, f"b-{name}", "aws:eu-central-1", gitops_repo=url)
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "gitops_repo"], (name, r.text)
        refused[name] = r.json()["detail"]
    # the file:// refusals read the same whether the target exists or not
    assert len({v for k, v in refused.items() if k != "ssh"}) == 1
    # a path inside the allowed root that is no repository: one sentence, no git wording
    bogus = svc.remotes / "not-a-repo"
    bogus.mkdir()
    r = svc.cluster(svc.beta, "b-bogus", "aws:eu-central-1", gitops_repo=bogus.as_uri())
    assert r.status_code == 422 and "cannot be read or written" in r.json()["detail"]
    gone = svc.cluster(svc.beta, "b-gone", "aws:eu-central-1", gitops_repo=(svc.remotes / "gone.git").as_uri())
    assert gone.json()["detail"] == r.json()["detail"]
    for path in ("../up", "a/../../b", ".git/hooks", "/abs/../x"):
        bad = svc.cluster(svc.beta, "b-path", "aws:eu-central-1", gitops_repo=alpha_remote.as_uri(), gitops_path=path)
        assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "gitops_path"], path
    assert svc.c.get("/v1/clusters", headers=svc.beta).json() == []
    assert not (svc.data / "workspaces" / "beta").exists() or not any((svc.data / "workspaces" / "beta").iterdir())
    assert not list((svc.outside).glob("secret.git/refs/heads/*"))  # nothing was pushed there


@pytest.mark.parametrize("link_at", ["clusters", "clusters/g0/shop/api.yaml"])
def test_a_link_in_the_tenants_repository_leads_nowhere(svc: Service, link_at: str) -> None:
    """A tenant commits a symbolic link where the broker writes: the dispatch fails, nothing is written outside."""
    plan = svc.placement(svc.alpha, "a-plan")
    remote = new_remote(svc.remotes / "alpha.git")
    seed = svc.outside / "seed"
    git(svc.outside, "clone", "-q", str(remote), str(seed))
    target = svc.outside / "victim"
    target.mkdir()
    link = seed / link_at
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target if link_at == "clusters" else target / "file.yaml", link)
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "link")
    git(seed, "push", "-q", "origin", "HEAD:main")
    site = _sites(plan)[0]
    assert svc.cluster(svc.alpha, "g0", site, gitops_repo=remote.as_uri()).status_code == 201
    for i, other in enumerate(_sites(plan)[1:], start=1):
        assert svc.cluster(svc.alpha, f"g{i}", other, gitops_repo=remote.as_uri()).status_code == 201
    r = svc.c.post(f"/v1/placements/{plan['id']}/dispatch", json={}, headers=svc.alpha)
    assert r.status_code == 502 and "not a plain" in r.json()["detail"], r.text
    assert list(target.iterdir()) == []


# ---- the operator: CLI paths under the roots, key rotation --------------------------------------


def test_operator_paths_stay_under_the_roots(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from broker.cli.main import app as cli

    roots, outside = tmp_path / "operator", tmp_path / "outside"
    roots.mkdir()
    outside.mkdir()
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    monkeypatch.setenv("BROKER_SERVER_PATH_ROOTS", json.dumps([str(roots)]))
    monkeypatch.setenv("BROKER_DATA_DIR", str(tmp_path / "data"))
    runner = CliRunner()
    secret = write_kubeconfig(outside / "kc.yaml", "http://127.0.0.1:9")
    (roots / "link.yaml").symlink_to(secret)

    def add(name: str, *target: str) -> Any:
        return runner.invoke(cli, ["clusters", "add", name, "--site", "aws:eu-central-1", *target])

    for path in (secret, roots / "link.yaml", roots / ".." / "outside" / "kc.yaml"):
        r = add("k", "--kubeconfig", str(path))
        assert r.exit_code == 2 and "outside the roots" in r.output, r.output
    assert add("g", "--gitops-dir", str(outside)).exit_code == 2
    passwd = roots / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    r = add("k", "--kubeconfig", str(passwd))
    assert r.exit_code == 2 and "not a kubeconfig" in r.output and "/bin/bash" not in r.output
    good = write_kubeconfig(roots / "kc.yaml", "http://127.0.0.1:9")
    assert add("k", "--kubeconfig", str(good), "--context", "edge-1", "--tenant", "acme").exit_code == 0
    listed = json.loads(runner.invoke(cli, ["clusters", "list", "--json", "--tenant", "acme"]).stdout)
    assert [c["kubeconfig"] for c in listed] == [str(good)]

    # the API without a key (authentication off, loopback) is the operator too: same roots
    b = open_broker(db_url, server_path_roots=[str(roots)], data_dir=str(tmp_path / "data"))
    with service_client(b) as c:
        r = c.post("/v1/clusters", json={"name": "k2", "site": "aws:eu-central-1", "kubeconfig": str(secret)})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "kubeconfig"]
        ok = c.post("/v1/clusters", json={"name": "k2", "site": "aws:eu-central-1", "kubeconfig": str(good)})
        assert ok.status_code == 201, ok.text
    b.engine.dispose()


def test_keys_rotate_without_losing_stored_credentials(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from broker.cli.main import app as cli

    old, new = KEY, Fernet.generate_key().decode()
    for s in _service(db_url, tmp_path, secret_key=old):
        r = s.cluster(s.alpha, "k", "aws:eu-central-1", kubeconfig_content=kubeconfig("http://127.0.0.1:1"))
        assert r.status_code == 201, r.text
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    monkeypatch.setenv("BROKER_SECRET_KEY", f"{new},{old}")  # step 1: the new key in front
    r = CliRunner().invoke(cli, ["clusters", "rotate-secrets"])
    assert r.exit_code == 0 and "re-encrypted 1" in r.output, r.output
    b = open_broker(db_url)
    with b.engine.connect() as conn:
        sealed = conn.execute(text("select kubeconfig_sealed from dispatch_clusters")).scalar_one()
    b.engine.dispose()
    # step 2: the old key can go; what is stored opens with the new one alone
    assert json.loads(Fernet(new.encode()).decrypt(sealed.encode()))["users"][0]["user"]["token"] == TOKEN
    monkeypatch.setenv("BROKER_SECRET_KEY", Fernet.generate_key().decode())  # a wrong key: refused, nothing changed
    r = CliRunner().invoke(cli, ["clusters", "rotate-secrets"])
    assert r.exit_code != 0 and "cannot be decrypted" in r.output
