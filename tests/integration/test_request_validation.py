"""What the API answers for request documents a person gets wrong: one shape, a plain message."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JSON = {"content-type": "application/json"}


def checkout() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / "checkout.yaml").read_text())
    return doc


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(checkout())
    at: Any = doc
    for p in path[:-1]:
        at = at[p]
    at[path[-1]] = value
    return doc


def _body_error(r: Any) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert problem["errors"] and all(e["loc"] == ["body"] for e in problem["errors"]), problem
    assert problem["detail"] == problem["errors"][0]["msg"]
    return dict(problem)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["workloads", 0, "replicas"], True),
        (["workloads", 0, "replicas"], "6"),
        (["workloads", 0, "replicas"], 6.5),
        (["workloads", 0, "cpu"], "2"),
        (["workloads", 0, "cpu"], False),
        (["workloads", 0, "spread", "min_sites"], True),
        (["dry_run"], 1),
        (["dry_run"], "yes"),
    ],
)
def test_numbers_and_flags_are_not_coerced(shared_client: TestClient, path: list[Any], value: Any) -> None:
    r = shared_client.post("/v1/placements", json=_with(path, value))
    assert r.status_code == 422, r.text
    assert any(e["loc"] == ["body", *path] for e in r.json()["errors"]), r.json()


#: fields whose type is a union: pydantic reports each member it tried under its own label
#: (`residency.str`, `max_unavailable.constrained-int`, `values.0.bool`), none of them the user's field
UNION_FIELDS: list[tuple[list[Any], Any]] = [
    (["workloads", 0, "residency"], 5),
    (["workloads", 0, "residency"], {"allowed_countries": 3}),
    (["workloads", 0, "max_unavailable"], "abc"),
    (["workloads", 0, "requirements"], [{"key": "instance_family", "operator": "In", "values": [[1]]}]),
]


def _field_paths(errors: list[dict[str, Any]]) -> set[str]:
    return {".".join(str(p) for p in e["loc"]) for e in errors}


@pytest.mark.parametrize(
    ("path", "value"), UNION_FIELDS, ids=["residency", "residency-field", "max-unavailable", "values"]
)
def test_errors_in_a_union_name_the_user_s_fields_only(shared_client: TestClient, path: list[Any], value: Any) -> None:
    r = shared_client.post("/v1/placements", json=_with(path, value))
    assert r.status_code == 422, r.text
    field = ".".join(str(p) for p in ["body", *path])
    paths = _field_paths(r.json()["errors"])
    assert all(p == field or p.startswith(field + ".") for p in paths), paths
    assert paths <= {field, f"{field}.allowed_countries", f"{field}.0.values.0"}, paths
    for label in ("str", "int", "bool", "InlineResidency", "constrained-"):
        assert f".{label}" not in r.json()["detail"] and not any(f".{label}" in p for p in paths), r.json()


def test_the_cli_names_the_same_fields_in_a_union(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    monkeypatch.setenv("COLUMNS", "300")
    doc = _with(["workloads", 0, "max_unavailable"], "abc")
    doc["workloads"][0]["residency"] = 5
    f = tmp_path / "req.yaml"
    f.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(app, ["place", "-f", str(f), "--format", "json"])
    assert r.exit_code == EXIT_INVALID, r.output
    errors = json.loads(r.stdout)["errors"]
    assert _field_paths(errors) == {"body.workloads.0.residency", "body.workloads.0.max_unavailable"}, errors
    assert "constrained-" not in r.stderr and ".str:" not in r.stderr and "residency:" in r.stderr, r.stderr


def test_an_integral_number_is_a_number(shared_client: TestClient) -> None:
    r = shared_client.post("/v1/placements", json=_with(["workloads", 0, "cpu"], 2))
    assert r.status_code == 200, r.text


def test_the_cli_refuses_what_the_api_refuses(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_DATABASE_URL", db_url)
    f = tmp_path / "req.yaml"
    f.write_text(yaml.safe_dump(_with(["workloads", 0, "replicas"], True)))
    r = CliRunner().invoke(app, ["place", "-f", str(f)])
    assert r.exit_code == EXIT_INVALID and "replicas" in r.output


def test_invalid_json_names_line_and_column(shared_client: TestClient) -> None:
    raw = b'{\n  "name": "x",\n  "workloads": [,]\n}'
    problem = _body_error(shared_client.post("/v1/placements", content=raw, headers=JSON))
    with pytest.raises(json.JSONDecodeError) as where:
        json.loads(raw)
    assert (where.value.lineno, where.value.colno) == (3, 17)  # the `,` in `[,]`
    assert "not valid JSON" in problem["detail"] and "line 3, column 17" in problem["detail"], problem


def test_a_body_that_is_not_utf8_gets_the_same_answer(shared_client: TestClient) -> None:
    raw = '{"name": "café"}'.encode("latin-1")
    problem = _body_error(shared_client.post("/v1/placements", content=raw, headers=JSON))
    assert "not valid UTF-8" in problem["detail"] and "0xe9" in problem["detail"], problem


@pytest.mark.parametrize(
    "raw",
    [b"[" * 5000, b"[" * 5000 + b"]" * 5000, b'{"name": ' * 5000, b'{"workloads": ' + b"[" * 100_000],
    ids=["open-arrays", "closed-arrays", "objects", "in-a-field"],
)
@pytest.mark.parametrize("url", ["/v1/placements", "/v1/sites", "/v1/latency/measurements", "/v1/workloads/web/usage"])
def test_a_body_nested_too_deeply_gets_the_same_answer(shared_client: TestClient, url: str, raw: bytes) -> None:
    problem = _body_error(shared_client.post(url, content=raw, headers=JSON))
    assert "the body" in problem["detail"] and "nested too deeply" in problem["detail"], problem
    assert problem["errors"][0]["type"] == "json_too_deep"


def test_a_json_body_sent_as_a_form_says_to_send_json(shared_client: TestClient) -> None:
    # what `curl -d '{...}'` sends without -H 'content-type: application/json'
    raw = json.dumps({"monthly_usd": 5000}).encode()
    form = {"content-type": "application/x-www-form-urlencoded"}
    problem = _body_error(shared_client.put("/v1/budgets", content=raw, headers=form))
    assert "Content-Type: application/json" in problem["detail"], problem


def test_a_self_dependency_is_refused_by_name(shared_client: TestClient) -> None:
    doc = _with(["workloads", 1, "depends_on"], [{"workload": "orders-db", "gib_per_hour": 1.0}])
    r = shared_client.post("/v1/placements", json=doc)
    assert r.status_code == 422, r.text
    err = r.json()["errors"][0]
    assert err["loc"] == ["body", "workloads", 1, "depends_on", 0, "workload"]
    assert "depends on itself" in err["msg"]


def test_dependencies_both_ways_are_traffic_both_ways(shared_client: TestClient) -> None:
    one_way = shared_client.post("/v1/placements", json=checkout())
    doc = _with(["workloads", 1, "depends_on"], [{"workload": "checkout-api", "gib_per_hour": 3.0}])
    both = shared_client.post("/v1/placements", json=doc)
    assert one_way.status_code == both.status_code == 200, both.text
    # the cycle is accepted and its traffic is charged: never less egress than one way alone
    assert both.json()["egress_cost_per_hour"] >= one_way.json()["egress_cost_per_hour"]
