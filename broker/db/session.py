"""Engine, sessions and migrations. Nothing is created at import time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, exc, make_url, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
# the PostgreSQL advisory lock key of `preparing` (any fixed 64-bit number the broker alone uses)
PREPARE_LOCK_KEY = 0x62726F6B6572  # "broker"


def make_engine(url: str, *, connect_timeout_s: int = 10) -> Engine:
    """An engine for the URL. A server database gets a connect timeout (libpq waits forever by
    default when packets are dropped) and pre-ping, so a dead server fails requests fast."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(conn, _record):  # type: ignore[no-untyped-def]
            cur = conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    connect_args = {"connect_timeout": connect_timeout_s} if url.startswith("postgresql") else {}
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args=connect_args)


def unreachable(error: BaseException) -> bool:
    """Whether `error` says the database cannot be used right now (refused or dropped connections,
    a server shutting down, an exhausted pool, a locked SQLite file) rather than that a statement
    is wrong: the same request may succeed once the database is back."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, exc.OperationalError | exc.InterfaceError | exc.TimeoutError)


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(url: str, revision: str = "heads") -> None:
    command.upgrade(alembic_config(url), revision)


@contextmanager
def preparing(url: str) -> Iterator[None]:
    """Held while a process migrates the database and loads the catalog into it. Processes that
    start on one fresh database at once (a server and a CLI command, the API's replicas) take
    turns: without it, each creates the same tables and the later ones fail ("table ... already
    exists"). PostgreSQL: a session-level advisory lock; SQLite: an OS lock on a file beside the
    database; an in-memory or other database: none."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": PREPARE_LOCK_KEY})
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": PREPARE_LOCK_KEY})
        finally:
            engine.dispose()
        return
    database = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    import fcntl

    lock_path = Path(database).with_name(Path(database).name + ".prepare-lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def downgrade_steps(url: str, revision: str) -> list[tuple[str, str]]:
    """The migrations `downgrade(url, revision)` would undo, newest first, each with the first
    line of its description; empty when `revision` is not below the database's schema (an
    upgrade, or where it is already). An unknown revision raises alembic's CommandError."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url))
    target = script.get_revision(revision)  # unknown: an error, before touching anything
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_heads()
    finally:
        engine.dispose()
    if not current or target is None:
        return []
    below = {r.revision for r in script.iterate_revisions(current, "base")}
    if target.revision not in below or target.revision in current:
        return []
    keep = {r.revision for r in script.iterate_revisions(target.revision, "base")}
    return [
        (r.revision, (r.doc or "").strip().splitlines()[0] if r.doc else "")
        for r in script.iterate_revisions(current, "base")
        if r.revision not in keep
    ]


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error (nothing half-written)."""
    with factory() as session, session.begin():
        yield session
