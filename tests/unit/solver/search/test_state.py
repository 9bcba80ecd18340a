"""What the search's phases share (search/state.py): a bound thread's value taken when the
time is up, without waiting for the thread (solves overran their limit waiting)."""

from __future__ import annotations

import math
import threading

from broker.solver.search.state import bound_of, in_thread
from broker.solver.types import BestSoFar


def _slow_bound(
    so_far: BestSoFar, hurry: threading.Event, proven: float, final: float, release: threading.Event | None = None
) -> float:
    """Publishes `proven` (unless -inf) at once, then works until told to hurry (and, given
    `release`, on until released), then ends with `final`."""
    if proven > -math.inf:
        so_far.offer(proven)
    hurry.wait(timeout=30)
    if release is not None:
        release.wait(timeout=30)
    return final


def test_the_best_proven_so_far_stands_when_the_time_is_up() -> None:
    so_far, hurry, release = BestSoFar(), threading.Event(), threading.Event()
    fut = in_thread("t", _slow_bound, so_far, hurry, 3.0, 10.0, release)
    assert so_far.proven.wait(timeout=30)  # the thread has published its bound
    assert bound_of(fut, so_far, 0.1, hurry) == 3.0
    # the thread was told to hurry and not waited for: it is still working (events, not the clock,
    # so the verdict holds on a loaded machine)
    assert hurry.is_set() and not fut.done()
    release.set()
    assert fut.result(timeout=30) == 10.0


def test_a_thread_that_proved_nothing_yet_is_waited_for_its_quick_bound() -> None:
    so_far, hurry = BestSoFar(), threading.Event()
    fut = in_thread("t", _slow_bound, so_far, hurry, -math.inf, 7.0)
    assert bound_of(fut, so_far, 0.1, hurry) == 7.0  # told to hurry, it ended with its bound


def _late_bound(
    so_far: BestSoFar, hurry: threading.Event, first: float, final: float, release: threading.Event
) -> float:
    """Proves `first` only once told to hurry, then works on until released before ending with `final`."""
    hurry.wait(timeout=30)
    so_far.offer(first)
    release.wait(timeout=30)
    return final


def test_a_hurried_thread_is_waited_for_its_first_bound_not_its_end() -> None:
    so_far, hurry, release = BestSoFar(), threading.Event(), threading.Event()
    fut = in_thread("t", _late_bound, so_far, hurry, 2.0, 9.0, release)
    assert bound_of(fut, so_far, 0.05, hurry) == 2.0
    assert not fut.done()  # returned on the first bound while the thread works on
    release.set()
    assert fut.result(timeout=30) == 9.0


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
