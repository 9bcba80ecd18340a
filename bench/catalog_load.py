"""Time loading the bundled catalog (190,974 pools) into a fresh PostgreSQL database.

Creates a scratch database on the server, migrates it, runs `load_snapshot`
`--loads` times (the second and later loads replace the catalog) and drops it.
`--inserts` times the previous loader (multi-row INSERTs instead of COPY).

    python bench/catalog_load.py [--server postgresql+psycopg://postgres@127.0.0.1:5432] [--loads 2] [--inserts]
"""

from __future__ import annotations

import argparse
import time
import uuid

from sqlalchemy import create_engine, func, select, text

from broker.catalog import store as catalog
from broker.db.models import PoolRow
from broker.db.session import make_engine, migrate, session_factory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    ap.add_argument("--loads", type=int, default=2)
    ap.add_argument("--inserts", action="store_true", help="the INSERT loader, for the before figure")
    args = ap.parse_args()
    if args.inserts:
        catalog._bulk_load = catalog._bulk_insert  # type: ignore[assignment]
    admin = create_engine(f"{args.server}/postgres", isolation_level="AUTOCOMMIT")
    name = f"broker_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        url = f"{args.server}/{name}"
        migrate(url)
        engine = make_engine(url)
        factory = session_factory(engine)
        for i in range(args.loads):
            started = time.perf_counter()
            counts = catalog.load_snapshot(factory)
            seconds = time.perf_counter() - started
            with factory() as s:
                stored = s.scalar(select(func.count()).select_from(PoolRow))
            print(f"load {i + 1} ({'INSERT' if args.inserts else 'COPY'}): {seconds:.1f} s, {stored} pools, {counts}")
        engine.dispose()
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
