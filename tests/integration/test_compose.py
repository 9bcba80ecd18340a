"""docker-compose.yml, Dockerfile and deploy/prometheus.yml, checked by parsing (no Docker engine here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.settings import Settings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return doc


def test_services_and_images(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"api", "worker", "postgres", "redis", "prometheus"}
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
    assert services["api"]["build"] == "." and (REPO / "Dockerfile").exists()
    assert services["worker"]["command"] == ["broker", "worker"]
    # the api scales: no fixed host port, so replicas do not collide
    assert all(":" not in str(p) for p in services["api"]["ports"])
    assert services["api"]["deploy"]["replicas"] >= 2


def test_depends_on_targets_exist_and_wait_for_health(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, svc in services.items():
        for target, cond in (svc.get("depends_on") or {}).items():
            assert target in services, (name, target)
            assert cond["condition"] == "service_healthy"
            assert "healthcheck" in services[target], target


def test_every_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        hc = svc["healthcheck"]
        assert hc["test"] and hc["interval"] and hc["retries"] >= 1, name


def test_environment_is_valid_broker_settings(compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("api", "worker"):
        env = compose["services"][name]["environment"]
        assert all(k.startswith(("BROKER_", "WEB_CONCURRENCY")) for k in env)
        for k, v in env.items():
            monkeypatch.setenv(k, str(v))
        s = Settings()
        assert s.database_url.startswith("postgresql+psycopg://") and "@postgres:5432/" in s.database_url
        assert s.redis_url == "redis://redis:6379/0" and s.auth == "required"
    pg = compose["services"]["postgres"]["environment"]
    assert f"{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/{pg['POSTGRES_DB']}" in s.database_url


def test_prometheus_scrapes_the_api_metrics(compose: dict[str, Any]) -> None:
    mount = compose["services"]["prometheus"]["volumes"][0].split(":")[0]
    prom = yaml.safe_load((REPO / mount).read_text())
    [job] = prom["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["dns_sd_configs"][0]["names"] == ["api"] and job["dns_sd_configs"][0]["port"] == 8080


def test_dockerfile_serves_the_app_with_workers_and_a_healthcheck() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "uvicorn api.main:app" in text and "--workers" in text and "HEALTHCHECK" in text
    assert "broker migrate" in text and "BROKER_AUTH=required" in text
    # the metrics samples of an earlier run go before uvicorn starts its workers (never in a worker)
    cmd = text[text.index("CMD [") :]
    assert cmd.index("rm -f $PROMETHEUS_MULTIPROC_DIR/*.db") < cmd.index("exec uvicorn")
    for path in ("api", "broker", "providers", "pricing", "migrations"):
        assert f"COPY {path} ./{path}" in text and (REPO / path).is_dir()
