"""Property-based run of the OpenAPI document: no 5xx and no response that breaks the schema.

Every operation of `/openapi.json` is exercised (schemathesis' coverage phase plus two
fuzzed examples each), except `POST /v1/pricing/refresh`, which calls the providers'
public price APIs in the background (its own tests replay recorded responses).
`POST /v1/placements/pareto` takes the very request model of `POST /v1/placements`,
whose coverage phase already walks its boundaries (~650 cases), and each valid case
solves a dozen points (~0.8 s): it gets ten fuzzed examples without the coverage
phase (~100 s less).

The app runs on a copy of the real catalog cut down to six regions (one per provider
in Europe and in the US, ~13k pools): a random placement then solves in tens of
milliseconds instead of ~0.6 s, and a catalog-rewriting write (sites, discounts,
commitments) takes a fraction of a second instead of ~20 s. The code paths are the
same; the full catalog has its own tests. The rate limit is lifted so that no case
is answered 429 instead of being tested.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance
from sqlalchemy import create_engine, text

from broker.app import Broker
from broker.settings import Settings
from tests.integration.conftest import create_pg_database, drop_pg_database, pg_database_url

SITES = (
    "aws:eu-central-1",
    "aws:us-east-1",
    "azure:westeurope",
    "azure:eastus",
    "gcp:europe-west1",
    "gcp:us-central1",
)
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance]


def _cut_catalog(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("DELETE FROM pools WHERE site NOT IN (" + ",".join(f"'{s}'" for s in SITES) + ")"))
        # another catalog version than the full one, so no cached copy of that is used
        c.execute(text("UPDATE catalog_meta SET value = :v WHERE key = 'version'"), {"v": uuid.uuid4().hex})
    engine.dispose()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The app on each database: limits a backend enforces (PostgreSQL's bigint OFFSET, its
    types and constraints) are only met by running the same cases against it."""
    from api.app import create_app

    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("schemathesis") / "broker.db"
        shutil.copy(request.getfixturevalue("template_db"), path)  # its own database: random requests store things
        url, drop = f"sqlite:///{path}", None
    else:
        admin = request.getfixturevalue("pg_server")
        name = create_pg_database(admin, template=request.getfixturevalue("pg_template"))
        url, drop = pg_database_url(admin, name), name
    _cut_catalog(url)
    broker = Broker.open(Settings(database_url=url, log_format="text", rate_limit="1000000/minute"))
    cat = broker.catalog()  # loaded before the first timed request
    assert 5_000 < cat.table.n_pools < 30_000
    try:
        yield create_app(broker=broker)
    finally:
        broker.engine.dispose()
        if drop is not None:
            drop_pg_database(admin, drop)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(scope="module")
def api_schema(app: Any) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(scope="module")
def fuzz_only_schema(app: Any) -> Any:
    s = schemathesis.openapi.from_asgi("/openapi.json", app)
    s.config.phases.coverage.enabled = False
    return s


fuzz_only = schemathesis.pytest.from_fixture("fuzz_only_schema")
PARETO = "/v1/placements/pareto"
# schemathesis' default read timeout (10 s) judged the machine's load: a write on PostgreSQL beside
# the suite's other workers and other jobs took longer. The responses' time is not what is checked.
REQUEST_TIMEOUT_S = 300


@schema.include(method="GET").parametrize()
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_reads_never_5xx_and_keep_their_schema(case: Any) -> None:
    case.call_and_validate(checks=CHECKS, timeout=REQUEST_TIMEOUT_S)


def _bounded(case: Any) -> Any:
    if isinstance(case.body, dict) and "workloads" in case.body:
        case.body["time_limit_s"] = 1  # bounded time: random requests can be huge
    return case


@schema.exclude(method="GET").exclude(path="/v1/pricing/refresh").exclude(path=PARETO).parametrize()
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_writes_never_5xx_and_keep_their_schema(case: Any) -> None:
    _bounded(case).call_and_validate(checks=CHECKS, timeout=REQUEST_TIMEOUT_S)


@fuzz_only.include(path=PARETO, method="POST").parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_pareto_never_5xx_and_keeps_its_schema(case: Any) -> None:
    _bounded(case).call_and_validate(checks=CHECKS, timeout=REQUEST_TIMEOUT_S)
