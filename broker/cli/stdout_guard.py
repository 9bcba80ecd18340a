"""Keep libraries' console output off a command's stdout while it computes a document.

`broker place --format json` is piped into parsers: anything a native library prints
during the solve (a solver banner, a forecaster's log line) would corrupt the document.
The solver turns HiGHS' logging off itself (broker/solver/model/quiet_highs.py); this guards
against every other writer, native or Python, by pointing file descriptor 1 at stderr for
the duration, so what they print is still seen, on stderr.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator


def _flush_all() -> None:
    sys.stdout.flush()
    # C stdio buffers its own stdout: flush it while fd 1 still points where it was written
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to protect
        yield
        return
    _flush_all()
    os.dup2(2, 1)
    try:
        yield
    finally:
        _flush_all()
        os.dup2(saved, 1)
        os.close(saved)
