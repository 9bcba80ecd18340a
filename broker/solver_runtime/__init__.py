"""What a process that runs solves sets up around the pure solver (broker/solver).

`prepare_process()` fixes the C heap's mmap threshold (heap.py), once, at the edge that opens
the broker. `solver_options(settings)` are the SolverOptions every solve of the service uses:
big MIPs in a child process killed at their time limit (mip_child.py). The options are cached
per setting, so each thread's child is kept between solves.
"""

from __future__ import annotations

import functools

from broker.settings import Settings
from broker.solver import SolverOptions
from broker.solver_runtime.heap import bound_the_heap
from broker.solver_runtime.mip_child import ChildProcessMipRunner


def prepare_process() -> None:
    """Process-wide settings a solving process wants (today: freed arrays go back to the OS)."""
    bound_the_heap()


def solver_options(settings: Settings) -> SolverOptions:
    """The options of every solve this process runs for `settings`."""
    return _options(settings.mip_idle_exit_s)


@functools.cache
def _options(idle_exit_s: float) -> SolverOptions:
    return SolverOptions(mip_runner=ChildProcessMipRunner(idle_exit_s=idle_exit_s))


__all__ = ["ChildProcessMipRunner", "bound_the_heap", "prepare_process", "solver_options"]
