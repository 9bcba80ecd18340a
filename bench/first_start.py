"""Time `broker serve` from start to a 200 on /healthz on a fresh data dir, then its restart.

A fresh start is what a new user's first `broker serve` does: no SQLite file and no catalog cache
(the user data and cache dirs, chosen by platformdirs from XDG_DATA_HOME / XDG_CACHE_HOME, point
at an empty temporary folder). `--profile FILE` also profiles the preparation in process
(Broker.open and the first catalog build; what `broker serve` does before uvicorn starts) with
cProfile and prints its top entries by cumulative time.

    python bench/first_start.py [--restarts 1] [--profile /tmp/first_start.prof]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_until_healthy(env: dict[str, str], timeout_s: float = 600.0) -> float:
    port = _free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli.main", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while time.perf_counter() - started < timeout_s:
            if proc.poll() is not None:
                raise SystemExit(f"broker serve exited {proc.returncode}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise SystemExit("no /healthz in time")
    finally:
        proc.terminate()
        proc.wait(30)


def profile_preparation(env: dict[str, str], out: str) -> None:
    code = (
        "import cProfile, pstats\n"
        "from broker.app import Broker\n"
        "from broker.settings import Settings\n"
        f"cProfile.run('Broker.open(Settings()).catalog()', {out!r})\n"
        f"pstats.Stats({out!r}).sort_stats('cumulative').print_stats(40)\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--profile", help="cProfile the preparation on another fresh dir into this file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="broker-first-start-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
        env |= {"XDG_DATA_HOME": str(Path(tmp, "data")), "XDG_CACHE_HOME": str(Path(tmp, "cache"))}
        print(f"first start: {serve_until_healthy(env):.1f} s to /healthz (load {os.getloadavg()[0]:.1f})")
        for i in range(args.restarts):
            print(f"restart {i + 1}: {serve_until_healthy(env):.1f} s to /healthz (load {os.getloadavg()[0]:.1f})")
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="broker-first-start-") as tmp:
            env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
            env |= {"XDG_DATA_HOME": str(Path(tmp, "data")), "XDG_CACHE_HOME": str(Path(tmp, "cache"))}
            profile_preparation(env, args.profile)


if __name__ == "__main__":
    main()
