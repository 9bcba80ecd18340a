"""Freed numpy arrays go back to the OS.

glibc serves allocations above its mmap threshold with their own mappings, returned on free,
but raises that threshold (up to 32 MiB) each time such a block is freed, so after the first
large temporaries most arrays of a few MiB come from the heap and stay resident once freed.
A solve allocates and frees hundreds of them (reduced-cost chunks, the node-share bound's terms): on
big requests the process kept hundreds of MB of freed arrays resident and its peak rose with
them. Fixing the threshold (mallopt M_MMAP_THRESHOLD) stops the raising; a no-op where glibc is
not the allocator. It changes the whole process, so the process that runs solves asks for it
(solver_runtime.prepare_process, called by Broker.open), never an import.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
THRESHOLD_BYTES = 4 << 20


def bound_the_heap() -> bool:
    """Fix glibc's mmap threshold; True when it took effect."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False
