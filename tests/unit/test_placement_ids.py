"""Placement ids are 'pl_' + a ULID: any ULID decoder reads the time they were made."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from ulid import ULID

from broker.app import new_placement_id


def test_a_placement_id_is_a_ulid_of_its_time() -> None:
    before = datetime.now(UTC)
    pid = new_placement_id()
    assert pid.startswith("pl_") and len(pid) == 29
    made = ULID.from_str(pid[3:]).datetime
    assert before - timedelta(milliseconds=1) <= made <= datetime.now(UTC) + timedelta(milliseconds=1)


def test_ids_sort_in_the_order_they_were_made() -> None:
    ids = []
    for _ in range(3):
        ids.append(new_placement_id())
        time.sleep(0.002)
    assert ids == sorted(ids)
