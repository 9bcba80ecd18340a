"""Property-based run of the OpenAPI document: no 5xx and no response that breaks the schema."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from broker.services import Broker
from broker.settings import Settings


@pytest.fixture(scope="module")
def app(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from api.app import create_app

    path = tmp_path_factory.mktemp("schemathesis") / "broker.db"
    shutil.copy(template_db, path)  # its own database: random requests store things
    broker = Broker.open(Settings(database_url=f"sqlite:///{path}", log_format="text"))
    broker.catalog()  # loaded before the first timed request
    return create_app(broker=broker)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(scope="module")
def api_schema(app: Any) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", app)


# Bounded in time: every GET of the API, and the writes of the placement and service endpoints
# (other areas' slow writes, such as dispatch and replan, have their own tests).
WRITES = r"^/v1/(placements|apikeys.*|budgets)$"


@schema.include(method="GET").parametrize()
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_reads_never_5xx_and_keep_their_schema(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance, status_code_conformance])


@schema.include(path_regex=WRITES).exclude(method="GET").parametrize()
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_never_5xx_and_keeps_its_schema(case: Any) -> None:
    if case.method == "POST" and case.path == "/v1/placements" and isinstance(case.body, dict):
        case.body["time_limit_s"] = 1  # bounded time: random requests can be huge
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance, status_code_conformance])
