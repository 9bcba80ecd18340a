"""Tenants cannot aim the server at its own network (issue 28): repository URLs and kubeconfig
API servers that resolve to loopback, private, link-local or metadata addresses answer a
problem+json 422 naming the field, unless the operator allowed the network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_dispatch_isolation import KEY, Service, _service, kubeconfig


@pytest.fixture()
def strict(db_url: str, tmp_path: Path) -> Iterator[Service]:
    yield from _service(db_url, tmp_path, secret_key=KEY, outbound_allowed_networks=[])  # public addresses only


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/fleet.git",
        "https://localhost:8443/fleet.git",
        "https://169.254.169.254/latest/meta-data",
        "https://10.0.0.1/fleet.git",
        "https://[::1]/fleet.git",
        "https://user:token@192.168.0.10/fleet.git",
    ],
)
def test_repository_urls_on_the_servers_network_are_refused(strict: Service, url: str) -> None:
    r = strict.cluster(strict.alpha, "g", "aws:eu-central-1", gitops_repo=url)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["loc"] == ["body", "gitops_repo"]
    assert "token" not in r.text


@pytest.mark.parametrize("server", ["https://169.254.169.254", "http://127.0.0.1:10250", "https://10.1.2.3:6443"])
def test_kubeconfig_api_servers_on_the_servers_network_are_refused(strict: Service, server: str) -> None:
    r = strict.cluster(strict.alpha, "k", "aws:eu-central-1", kubeconfig_content=json.dumps(kubeconfig(server)))
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == ["body", "kubeconfig_content", "clusters", 0, "cluster", "server"]


def test_local_schemes_are_refused_without_an_operator_root(strict: Service) -> None:
    for url in ("file:///etc", "file:///srv/git/fleet.git", "ssh://git@example.com/fleet.git", "git://example.com/x"):
        r = strict.cluster(strict.alpha, "f", "aws:eu-central-1", gitops_repo=url)
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "gitops_repo"], (url, r.text)


def test_the_operator_allow_list_lets_a_private_api_server_in(db_url: str, tmp_path: Path) -> None:
    for svc in _service(db_url, tmp_path, secret_key=KEY, outbound_allowed_networks=["10.0.0.0/8"]):
        ok = svc.cluster(svc.alpha, "k", "aws:eu-central-1", kubeconfig_content=kubeconfig("https://10.1.2.3:6443"))
        assert ok.status_code == 201, ok.text
        no = svc.cluster(svc.alpha, "m", "aws:eu-central-1", kubeconfig_content=kubeconfig("https://169.254.169.254"))
        assert no.status_code == 422
