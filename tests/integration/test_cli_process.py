"""`broker` as a pipeline runs it: a separate process, its stdout read by another program.

Typer's CliRunner captures Python's sys.stdout only; what a native library writes to file
descriptor 1 (a solver banner) and how the process exits on an unhandled error are seen
only from outside.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from broker.cli.exit_codes import EXIT_INVALID, EXIT_UNREACHABLE

REPO = Path(__file__).resolve().parents[2]
CHECKOUT = REPO / "examples" / "checkout.yaml"


def broker(db_url: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BROKER_DATABASE_URL": db_url, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", "from broker.cli import main; main()", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
    )


def test_json_output_parses_as_it_comes_from_the_process(db_url: str) -> None:
    r = broker(db_url, "place", "-f", str(CHECKOUT), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # nothing but the document on stdout
    assert doc["status"] in ("optimal", "feasible") and doc["assignments"]
    assert "HiGHS" not in r.stdout


def test_markdown_output_is_only_the_comment(db_url: str) -> None:
    r = broker(db_url, "place", "-f", str(CHECKOUT), "--format", "markdown")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("### Placement `checkout rollout`"), r.stdout[:300]
    assert "HiGHS" not in r.stdout


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("binary.yaml", bytes(range(256)) * 4),
        ("latin1.yaml", "name: café\nworkloads: []\n".encode("latin-1")),
        ("binary.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
    ],
    ids=["binary", "latin-1", "png-named-json"],
)
def test_a_file_that_is_not_utf8_text_exits_2_with_a_message(
    db_url: str, tmp_path: Path, name: str, content: bytes
) -> None:
    f = tmp_path / name
    f.write_bytes(content)
    r = broker(db_url, "place", "-f", str(f))
    assert r.returncode == EXIT_INVALID, r.stderr
    assert "Traceback" not in r.stderr and "not UTF-8 text" in r.stderr
    j = broker(db_url, "place", "-f", str(f), "--format", "json")
    assert j.returncode == EXIT_INVALID and json.loads(j.stdout)["status"] == "invalid"


@pytest.mark.parametrize(
    ("name", "content"), [("deep.json", "[" * 5000), ("deep.yaml", "[" * 5000)], ids=["json", "yaml"]
)
def test_a_file_nested_too_deeply_exits_2_with_a_message(db_url: str, tmp_path: Path, name: str, content: str) -> None:
    f = tmp_path / name
    f.write_text(content)
    r = broker(db_url, "place", "-f", str(f), "--format", "json")
    assert r.returncode == EXIT_INVALID, r.stderr
    assert "Traceback" not in r.stderr and "nested too deeply" in r.stderr
    assert json.loads(r.stdout)["status"] == "invalid"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again once the block ends: nothing listens there


def test_an_unreachable_server_is_one_line_and_exit_5(db_url: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    r = broker(db_url, "place", "-f", str(CHECKOUT), "--server", url)
    assert r.returncode == EXIT_UNREACHABLE
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith(f"cannot reach {url}")
    bad = broker(db_url, "place", "-f", str(CHECKOUT), "--server", "localhost:8080")
    assert bad.returncode == EXIT_INVALID and "Traceback" not in bad.stderr
