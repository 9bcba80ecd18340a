"""Ids are minted in one place (broker/ids.py), one function per kind: the kind's prefix and a
ULID, so any ULID decoder reads the time they were made."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ulid import ULID

from broker import ids
from broker.ids import new_placement_id

KINDS: list[tuple[Callable[[], str], str]] = [
    (ids.new_placement_id, "pl_"),
    (ids.new_replan_id, "rp_"),
    (ids.new_dispatch_id, "dp_"),
    (ids.new_job_id, "job_"),
    (ids.new_simulation_id, "sim_"),
    (ids.new_price_refresh_id, "prj_"),
]


@pytest.mark.parametrize(("mint", "prefix"), KINDS)
def test_each_kind_is_its_prefix_and_a_ulid_of_its_time(mint: Callable[[], str], prefix: str) -> None:
    before = datetime.now(UTC)
    made_id = mint()
    assert made_id.startswith(prefix) and len(made_id) == len(prefix) + 26
    made = ULID.from_str(made_id[len(prefix) :]).datetime
    assert before - timedelta(milliseconds=1) <= made <= datetime.now(UTC) + timedelta(milliseconds=1)


def test_ids_sort_in_the_order_they_were_made() -> None:
    made = []
    for _ in range(3):
        made.append(new_placement_id())
        time.sleep(0.002)
    assert made == sorted(made)


def test_no_module_mints_an_id_of_its_own() -> None:
    """No ULID made, nor an id cut out of another kind's, outside broker/ids.py."""
    root = Path(ids.__file__).parent
    found = []
    for path in [*root.rglob("*.py"), *(root.parent / "api").rglob("*.py")]:
        if path == Path(ids.__file__):
            continue
        text = path.read_text()
        if re.search(r"\bULID\(\)|new_\w+_id\(\)\[|\"[a-z]{2,4}_\" \+ ", text):
            found.append(str(path.relative_to(root.parent)))
    assert found == []
