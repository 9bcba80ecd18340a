"""An answer that depends on the clock says so (issue 39: a CI request answered 2.16, 2.23 and
2.15 $/h on three runs), and `broker place --reproducible` asks for one that does not."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from broker.cli.main import app
from broker.placements.time_budget import CLOCK_WARNING_PREFIX, clock_warning

from .service_support import open_broker, service_client, small_request

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _clock_warnings(doc: dict[str, Any]) -> list[str]:
    return [w for w in doc["warnings"] if w.startswith(CLOCK_WARNING_PREFIX)]


@pytest.mark.parametrize(
    ("status", "stop_reason", "reproducible", "warns"),
    [
        ("feasible", "time_limit", False, True),
        ("feasible", "gap_target", False, True),
        ("feasible", "stall", False, True),
        ("optimal", "optimal", False, False),  # proven: another run finds the same cost
        ("feasible", "time_limit", True, False),  # work limits; its own warning says when the clock cut it
    ],
)
def test_which_answers_depend_on_the_clock(status: str, stop_reason: str, reproducible: bool, warns: bool) -> None:
    said = clock_warning(status=status, stop_reason=stop_reason, gap_pct=1.5, reproducible=reproducible)
    assert (said is not None) == warns
    if said:
        assert f"({stop_reason}, 1.50% gap)" in said and '"reproducible": true' in said


def test_an_answer_not_proven_optimal_warns_and_a_proven_one_does_not(db_url: str, monkeypatch: Any) -> None:
    import broker.app as app_module

    real = app_module.solve

    def stopped_by_the_clock(problem: Any, **kw: Any) -> Any:
        # the real answer, as a search cut short by its time would report it (a gap left open)
        result = real(problem, **kw)
        return replace(result, status="feasible", stop_reason="time_limit", gap_pct=2.5)

    broker = open_broker(db_url)
    with service_client(broker) as c:
        proven = c.post("/v1/placements", json=small_request("proven", dry_run=True)).json()
        monkeypatch.setattr(app_module, "solve", stopped_by_the_clock)
        cut = c.post("/v1/placements", json=small_request("cut", dry_run=True)).json()
        cut_repro = c.post("/v1/placements", json=small_request("cut", dry_run=True, reproducible=True)).json()
    assert proven["status"] == "optimal" and _clock_warnings(proven) == []
    assert len(_clock_warnings(cut)) == 1 and "time_limit, 2.50% gap" in _clock_warnings(cut)[0]
    assert _clock_warnings(cut_repro) == []


def test_broker_place_reproducible_solves_on_work_limits(env: str, tmp_path: Path, monkeypatch: Any) -> None:
    import broker.app as app_module

    seen: list[Any] = []
    real = app_module.solve

    def recording(problem: Any, **kw: Any) -> Any:
        seen.append(kw["options"].work_limits)
        return real(problem, **kw)

    monkeypatch.setattr(app_module, "solve", recording)
    request = tmp_path / "ci.yaml"
    request.write_text(yaml.safe_dump({**yaml.safe_load((EXAMPLES / "checkout.yaml").read_text()), "dry_run": False}))
    runner = CliRunner()
    r = runner.invoke(app, ["place", "-f", str(request), "--format", "json", "--reproducible"])
    assert r.exit_code == 0, r.output
    plain = runner.invoke(app, ["place", "-f", str(request), "--format", "json"])
    assert plain.exit_code == 0, plain.output
    assert seen[0] is not None and seen[1] is None
    stored = open_broker(env).get_placement(json.loads(r.stdout)["id"])
    assert stored.request["reproducible"] is True
