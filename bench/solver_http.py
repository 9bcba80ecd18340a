"""The bench's generated requests over HTTP, as a user sends them, against a real server.

Starts `broker serve` on a temporary SQLite database with the default settings (nothing but
the database, the port and text logs is set), posts each request the way a client would (no
`time_limit_s`: the server picks the budget for its size; the server decides sync or async,
and a 202 job is polled until it ends) and prints one comparable figure per line per request:

    python bench/solver_http.py [--sizes 3000,20000] [--shape plain,deps] [--time-limit S]

The requests are bench/solver.py's (`generate`, `generate_dependency_heavy`, seed 7), so the
figures sit beside its in-process ones. `wall_s` is what the client waited (POST to answer,
polling included); `server_solve_s` is the answer's `solve_ms`; `server_peak_rss_mib` is the
server process's RSS high-water mark since it started (catalog included), and
`mip_children_peak_rss_mib` the largest RSS its MIP child processes reached while sampled.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.solver import GENERATORS

_BROKER = "import sys; from broker.cli import main; sys.argv[0] = 'broker'; main()"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


class ChildRss:
    """Samples the RSS of the server's child processes (the MIP children) twice a second."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib, self._stop = pid, 0, threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for child in _children(self.pid):
                self.peak_kib = max(self.peak_kib, _status_kib(child, "VmRSS"))

    def reset(self) -> None:
        self.peak_kib = 0

    def stop(self) -> None:
        self._stop.set()


def start_server(workdir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "BROKER_DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}",
        "BROKER_LOG_FORMAT": "text",
        "BROKER_DATA_DIR": str(workdir / "data"),
    }
    log = (workdir / "server.log").open("wb")
    return subprocess.Popen(
        # `broker serve`, with this interpreter (and so this checkout's code on PYTHONPATH)
        [sys.executable, "-c", _BROKER, "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )


def wait_ready(http: httpx.Client, server: subprocess.Popen[bytes], timeout_s: float = 900) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if server.poll() is not None:
            raise SystemExit(f"the server exited ({server.returncode}) before it was ready")
        try:
            if http.get("/healthz").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise SystemExit("the server was not ready in time")


def place(http: httpx.Client, doc: dict[str, Any]) -> tuple[str, int, dict[str, Any], float]:
    """POST the request as a client would; poll its job when the server makes it one.
    Returns (sync | async, the first answer's status, the placement document or problem, wall s)."""
    t0 = time.perf_counter()
    r = http.post("/v1/placements", json=doc)
    if r.status_code != 202:
        return "sync", r.status_code, r.json(), time.perf_counter() - t0
    where = r.headers["location"]
    while True:
        time.sleep(1.0)
        job = http.get(where).json()
        if job["status"] in ("succeeded", "failed"):
            body = job["result"] if job["status"] == "succeeded" else job["error"]
            return "async", 202, body, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="3000,20000")
    ap.add_argument("--shape", default="plain,deps", help="comma list of plain, deps")
    ap.add_argument("--time-limit", type=float, default=0.0, help="0 = send none (the server's default budget)")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-http-"))
    port = _free_port()
    print(f"load_average_start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    server = start_server(workdir, port)
    sampler = ChildRss(server.pid)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=httpx.Timeout(900, connect=10)) as http:
            t = time.perf_counter()
            wait_ready(http, server)
            print(f"server_ready_s: {time.perf_counter() - t:.1f}")
            for shape in args.shape.split(","):
                for n in (int(s) for s in args.sizes.split(",")):
                    doc = GENERATORS[shape](n)
                    if args.time_limit:
                        doc["time_limit_s"] = args.time_limit
                    sampler.reset()
                    mode, status, body, wall = place(http, doc)
                    key = f"{n}" if shape == "plain" else f"{n}.{shape}"
                    print(f"{key}.mode: {mode}")
                    if "cost_per_hour" not in body:
                        print(f"{key}.http_status: {status}")
                        print(f"{key}.problem: {body.get('type')} {body.get('detail')}")
                        continue
                    print(f"{key}.cost_per_hour: {body['cost_per_hour']}")
                    print(f"{key}.lower_bound_per_hour: {body['lower_bound_per_hour']}")
                    print(f"{key}.gap_pct: {body['gap_pct']}")
                    print(f"{key}.egress_per_hour: {round(body['egress_cost_per_hour'], 4)}")
                    print(f"{key}.status: {body['status']}")
                    print(f"{key}.stop_reason: {body.get('stop_reason')}")
                    print(f"{key}.time_limit_s: {body.get('time_limit_s')}")
                    print(f"{key}.wall_s: {wall:.1f}")
                    print(f"{key}.server_solve_s: {body['solve_ms'] / 1000:.1f}")
                    print(f"{key}.server_peak_rss_mib: {_status_kib(server.pid, 'VmHWM') / 1024:.0f}")
                    print(f"{key}.mip_children_peak_rss_mib: {sampler.peak_kib / 1024:.0f}")
                    for w in body.get("warnings", []):
                        print(f"{key}.warning: {w}")
                    sys.stdout.flush()
    finally:
        sampler.stop()
        server.terminate()
        server.wait(timeout=60)
        print(f"load_average_end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
