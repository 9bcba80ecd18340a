"""Native writers stay off stdout: HiGHS' banner, and anything printed while the CLI solves."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def test_a_new_highs_model_prints_no_banner() -> None:
    r = _run(
        """
        from broker.solver.model.quiet_highs import QuietHighs
        h = QuietHighs()
        h.addVar(0.0, 1.0)
        h.run()
        print(h.getOptionValue("output_flag")[1])
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "False\n"  # the banner would come first


def test_output_to_fd_1_goes_to_stderr_while_guarded_and_stdout_is_back_after() -> None:
    r = _run(
        """
        import ctypes, os
        from broker.cli.stdout_guard import stdout_to_stderr
        print("before")
        with stdout_to_stderr():
            os.write(1, b"native\\n")
            ctypes.CDLL(None).printf(b"buffered by C stdio\\n")
            print("python inside")
        print("after")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "before\nafter\n"
    assert "native" in r.stderr and "buffered by C stdio" in r.stderr and "python inside" in r.stderr
