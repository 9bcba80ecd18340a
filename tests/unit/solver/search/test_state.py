"""What the search's phases share (search/state.py): a bound thread's value taken when the
time is up, without waiting for the thread (solves overran their limit waiting)."""

from __future__ import annotations

import math
import threading
import time

from broker.solver.search.state import bound_of, in_thread
from broker.solver.types import BestSoFar


def _slow_bound(so_far: BestSoFar, hurry: threading.Event, proven: float, final: float) -> float:
    """Publishes `proven` (unless -inf) at once, then works until told to hurry, then ends with `final`."""
    if proven > -math.inf:
        so_far.offer(proven)
    hurry.wait(timeout=30)
    return final


def test_the_best_proven_so_far_stands_when_the_time_is_up() -> None:
    so_far, hurry = BestSoFar(), threading.Event()
    fut = in_thread("t", _slow_bound, so_far, hurry, 3.0, 10.0)
    time.sleep(0.05)
    t0 = time.perf_counter()
    assert bound_of(fut, so_far, 0.1, hurry) == 3.0
    assert time.perf_counter() - t0 < 5.0 and hurry.is_set()


def test_a_thread_that_proved_nothing_yet_is_waited_for_its_quick_bound() -> None:
    so_far, hurry = BestSoFar(), threading.Event()
    fut = in_thread("t", _slow_bound, so_far, hurry, -math.inf, 7.0)
    assert bound_of(fut, so_far, 0.1, hurry) == 7.0  # told to hurry, it ended with its bound


def _late_bound(so_far: BestSoFar, hurry: threading.Event, first: float, final: float) -> float:
    """Proves `first` only once told to hurry, then works on for seconds before ending with `final`."""
    hurry.wait(timeout=30)
    so_far.offer(first)
    time.sleep(3.0)
    return final


def test_a_hurried_thread_is_waited_for_its_first_bound_not_its_end() -> None:
    so_far, hurry = BestSoFar(), threading.Event()
    fut = in_thread("t", _late_bound, so_far, hurry, 2.0, 9.0)
    t0 = time.perf_counter()
    assert bound_of(fut, so_far, 0.05, hurry) == 2.0
    assert time.perf_counter() - t0 < 2.5


def test_a_thread_that_ends_in_time_gives_its_own_value() -> None:
    so_far, hurry = BestSoFar(), threading.Event()
    hurry.set()
    fut = in_thread("t", _slow_bound, so_far, hurry, 1.0, 5.0)
    assert bound_of(fut, so_far, 10.0, hurry) == 5.0


def test_best_so_far_only_rises() -> None:
    best = BestSoFar()
    for v in (2.0, 1.0, 4.0, -math.inf):
        best.offer(v)
    assert best.value == 4.0
