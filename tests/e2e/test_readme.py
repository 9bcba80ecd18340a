"""Every command of the README runs as written.

The README's bash blocks are read from the file itself: the tour's `curl` calls against a
server, the CLI's commands and the production-service block that starts a server of its own.
A server (uvicorn, embedded SQLite copied from the session's template) listens on a free
port, and `localhost:8080` in the commands points there. Each block runs in one bash process
(variables carry from line to line, as in a terminal) in a scratch directory that sees the
repository's `examples/`, `tests/` and `bench/`, with HOME there too (`~/fleet`). Every command
must exit 0 (or with the code the README gives), print no traceback, and print what it says:
JSON that parses and is not a problem document, a markdown comment, the documented output of
a `$ ` transcript.

Not run: installing (`pip install`, the test already runs in that environment), the test
suite itself, benchmarks (minutes each; their scripts must exist), commands that need the
reader's Kubernetes API server, and a price refresh from a provider's public API when this
machine cannot resolve it (each said so in the test's output).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.app import Broker
from broker.settings import Settings
from tests.e2e.live_server import free_port, serving

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
pytestmark = pytest.mark.slow

_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
_NOT_RUN = ("pip install", "python bench/")  # set-up and benchmarks (see the module's doc)
_NETWORK = {"broker pricing refresh": "prices.azure.com"}  # a command and a host it needs
# commands that talk to a Kubernetes API server named by a kubeconfig of the reader's (their own
# tests run them against fake API servers): not run, said so
_NEEDS_CLUSTER = ("broker kueue-dispatcher", "broker ocm publish")


@dataclass
class Block:
    line: int  # of the README
    text: str

    @property
    def commands(self) -> list[str]:
        """Logical commands: comments dropped, continuation lines joined, for ... done together."""
        out: list[str] = []
        cur: list[str] = []
        depth = 0
        for line in self.text.splitlines():
            code = line.split(" # ", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
            if not cur and not code:
                continue
            cur.append(line)
            if re.search(r"(^|;)\s*do$", code):
                depth += 1
            if re.match(r"\s*done\b", code):
                depth -= 1
            if code.endswith("\\") or depth > 0:
                continue
            out.append("\n".join(cur))
            cur = []
        assert not cur, f"README line {self.line}: unterminated command {cur}"
        return out


def _blocks() -> list[Block]:
    text = README.read_text()
    return [Block(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


def _resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


@dataclass
class Ran:
    command: str
    rc: int
    out: str
    err: str


def _run_block(commands: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 900) -> list[Ran]:
    """The commands in one bash process, each followed by a marker with its exit status."""
    script = "".join(f'{{ {c}\n}}; echo "@@{i} $?@@"; echo "@@{i}@@" >&2\n' for i, c in enumerate(commands))
    script += "kill $(jobs -p) 2> /dev/null; wait\n"  # a server the block started holds our pipes open
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so a server the block starts in the background goes with it
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    outs = re.split(r"@@\d+ (\d+)@@\n", out)
    errs = re.split(r"@@\d+@@\n", err)
    ran = [
        Ran(c, int(outs[2 * i + 1]), outs[2 * i], errs[i] if i < len(errs) else "")
        for i, c in enumerate(commands)
        if 2 * i + 1 < len(outs)
    ]
    assert len(ran) == len(commands), f"the block stopped after {len(ran)} commands:\n{out}\n{err}"
    return ran


def _check(r: Ran, where: str) -> None:
    what = f"{where}: `{r.command}` exited {r.rc}\n--- stdout\n{r.out[-3000:]}\n--- stderr\n{r.err[-3000:]}"
    assert "Traceback" not in r.err and "Traceback" not in r.out, what
    expected_rc = re.search(r";\s*echo \$\?\s+#\s*(\d+)\b", r.command)
    if expected_rc:  # `...; echo $?   # 4: ...`: the printed status is the documented one
        assert r.rc == 0 and r.out.strip().splitlines()[-1] == expected_rc.group(1), what
        return
    assert r.rc == 0, what
    cmd = r.command.split(" # ", 1)[0]
    if cmd.startswith("curl") and "|" not in cmd and " -o " not in cmd:
        # a server started in the background by the block logs its requests to the same terminal
        doc: Any = json.loads("\n".join(x for x in r.out.splitlines() if not x.startswith("INFO:")))
        assert not (isinstance(doc, dict) and isinstance(doc.get("status"), int) and doc["status"] >= 400), what
    if re.search(r"\|\s*python -m json.tool", cmd) or cmd.startswith("python -m json.tool"):
        assert r.out.lstrip()[:1] in ("{", "["), what
    if cmd.startswith("broker place") and "--format json" in cmd:
        assert json.loads(r.out)["status"] in ("optimal", "feasible"), what
    if cmd.startswith("broker place") and "--format markdown" in cmd:
        assert r.out.startswith("### Placement"), what


@pytest.fixture(scope="module")
def scratch(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], int]]:
    """A working directory, the environment of its commands, and a server for the tour."""

    root = tmp_path_factory.mktemp("readme")
    db = root / "broker.db"
    shutil.copy(template_db, db)
    work = root / "work"
    (root / "home").mkdir()
    work.mkdir()
    for name in ("examples", "tests", "bench"):
        (work / name).symlink_to(REPO / name)
    env = {
        **os.environ,
        "BROKER_DATABASE_URL": f"sqlite:///{db}",
        "HOME": str(root / "home"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "COLUMNS": "200",
        "BROKER_LOG_FORMAT": "text",
    }
    env.pop("BROKER_API_KEY", None)
    env.pop("BROKER_AUTH", None)
    port = free_port()
    broker = Broker.open(Settings(database_url=f"sqlite:///{db}", log_format="text"))
    with serving(broker, port, start_timeout_s=60):
        yield work, env, port


def _point_at(command: str, port: int, *, own_server: bool = False) -> str:
    """The tour's server (8080) is the test's; in a block that starts its own server, the port
    the block gives it (8081 beside the tour's) is a free one too."""
    ports = r"80(?:80|81)" if own_server else "8080"
    return re.sub(rf"(localhost|127\.0\.0\.1):{ports}\b", f"127.0.0.1:{port}", command)


def test_the_readme_has_the_blocks_this_test_runs() -> None:
    text = "\n".join(b.text for b in _blocks())
    for needle in (
        "curl -s localhost:8080/v1/sites",
        "broker place -f",
        "broker dispatch",
        "PUT localhost:8081/v1/budgets",  # a second server beside the tour's
    ):
        assert needle in text, needle


_SHELL_BLOCK = re.compile(r"^```(?:bash|sh|console)\n(.*?)^```", re.S | re.M)
# a request body: -d/--data*, not -F (multipart: curl sets its type) nor --json (it sets the type)
_BODY = re.compile(r"(?:^|\s)(?:-d|--data(?:-raw|-binary|-ascii|-urlencode)?)(?:=|\s+)(\S+)")
_CONTENT_TYPE = re.compile(r"""-H\s*(['"])content-type:\s*([^'"]+)\1""", re.I)


def _curl_commands(path: Path) -> list[tuple[int, str]]:
    """The curl calls of a markdown file's shell blocks (line of the block, the call with its
    continuation lines joined; a call after a pipe too) and of its inline code (line, call)."""
    text = path.read_text()
    calls = []
    for m in _SHELL_BLOCK.finditer(text):
        block = Block(text.count("\n", 0, m.start()) + 2, m.group(1))
        for command in block.commands:
            joined = re.sub(r"\\\n\s*", " ", command.removeprefix("$ "))
            calls += [(block.line, "curl " + c) for c in re.split(r"(?:^|[|;&]\s*)curl\s", joined)[1:]]
    prose = _SHELL_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    calls += [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in re.finditer(r"`(curl\s[^`]+)`", prose)]
    return calls


def test_every_documented_curl_with_a_body_names_its_content_type() -> None:
    """The API refuses a body without Content-Type: application/json (422 "send the body as JSON
    with Content-Type: application/json"), and curl -d sends application/x-www-form-urlencoded:
    a documented call with a body says which type it sends."""
    docs = [README, *sorted((REPO / "docs").glob("*.md"))]  # docs/contract/ is a verbatim copy
    checked, wrong = 0, []
    for path in docs:
        for line, call in _curl_commands(path):
            body = _BODY.search(call)
            if body is None or " --json " in f"{call} ":
                continue
            checked += 1
            declared = _CONTENT_TYPE.search(call)
            data = body.group(1).strip("'\"")
            json_body = data.startswith(("{", "[")) or data.endswith(".json") or data == "@-"
            if declared is None or (json_body and declared.group(2).strip().lower() != "application/json"):
                wrong.append(f"{path.relative_to(REPO)}:{line}: {call.strip()}")
    assert not wrong, "curl with a body but not its JSON content type:\n" + "\n".join(wrong)
    assert checked >= 8


def test_every_readme_command_runs_as_written(scratch: tuple[Path, dict[str, str], int]) -> None:
    work, env, port = scratch
    ran = skipped = 0
    notes: list[str] = []
    for block in _blocks():
        where = f"README.md:{block.line}"
        if block.text.startswith("$ "):  # a transcript: the command, then what it prints
            command, *expected = block.text.strip().splitlines()
            [r] = _run_block([command[2:]], cwd=work, env=env)
            printed = [line.rstrip() for line in (r.out + r.err).strip().splitlines()]
            assert printed == [line.rstrip() for line in expected], (where, printed)
            assert r.rc == (3 if printed[0].startswith("infeasible") else 0), (where, r.rc)
            ran += 1
            continue
        commands = [c for c in block.commands if not c.startswith(_NOT_RUN) and c != "pytest"]
        for c in block.commands:
            if c.startswith("python bench/"):  # not run; the script must exist
                assert (REPO / c.split()[1]).is_file(), (where, c)
        if not commands:
            skipped += len(block.commands)
            continue
        own_server = any("broker serve" in c for c in commands)
        target = free_port() if own_server else port
        runnable = []
        for c in commands:
            c = _point_at(c, target, own_server=own_server)
            if own_server and "broker serve" in c:
                c = re.sub(r"(broker serve[^&;|]*?) --port \d+", r"\1", c)  # the block's own port, replaced
                c = re.sub(r"broker serve( |$)", rf"broker serve --port {target}\1", c)
            for needs, host in _NETWORK.items():
                if needs in c and not _resolves(host):
                    head = c.split(f" && {needs}", 1)[0]
                    notes.append(f"{where}: `{needs}` not run ({host} does not resolve here)")
                    c = head if head != c else ""
            if c.startswith(_NEEDS_CLUSTER):
                notes.append(f"{where}: `{c.split(' --', 1)[0]}` not run (needs a Kubernetes API server)")
                c = ""
            if c:
                runnable.append(c)
        for r in _run_block(runnable, cwd=work, env=env):
            _check(r, where)
            ran += 1
    print(f"README: {ran} commands run, {skipped} not run (set-up, tests, benchmarks)", *notes, sep="\n")
    assert ran >= 20
    # what the tour stored is there, and what the dispatch block wrote
    stored = json.loads((work / "placement.json").read_text())
    assert stored["id"].startswith("pl_")
    assert (work / "focus.parquet").stat().st_size > 0 and (work / "pred.csv").stat().st_size > 0
