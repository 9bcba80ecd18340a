"""PoolList: a table's pools as columns behave as the tuple of Pool objects they replace."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from broker.core.domain import Arch, CapacityType, Pool
from broker.core.pool_list import FIELDS, PoolList


def _pools() -> list[Pool]:
    od, spot, res, amd = CapacityType.ONDEMAND, CapacityType.SPOT, CapacityType.RESERVED, Arch.AMD64
    return [
        Pool("aws:x/m5.large/ondemand", "aws:x", "m5.large", od, amd, 2, 8, 0.0, None, 0.096, None, "snap", "2026-11"),
        Pool("aws:x/g5.xlarge/spot", "aws:x", "g5.xlarge", spot, amd, 4, 16, 1.0, "A10G", 0.4, None, "live", "2026-12"),
        Pool("private:dc/r740/reserved", "private:dc", "r740", res, amd, 32, 256, 0.0, None, 0.3, 12, "tco", "2026-10"),
    ]


def test_it_reads_back_the_pools_it_was_made_of() -> None:
    pools = _pools()
    pl = PoolList.of(pools)
    assert len(pl) == 3
    assert list(pl) == pools
    assert pl[1] == pools[1] and pl[np.int64(2)] == pools[2] and pl[-1] == pools[-1]
    assert pl[1] is pl[1]  # made once
    assert list(pl[1:]) == pools[1:]
    assert pl.ids == tuple(p.id for p in pools)
    assert pl.column("max_nodes") == (None, None, 12)
    assert list(pl.take([2, 0])) == [pools[2], pools[0]]
    with pytest.raises(IndexError):
        pl[3]


def test_stored_rows_give_the_same_pools() -> None:
    pools = _pools()
    rows = [
        tuple(getattr(p, f).value if f in ("capacity_type", "arch") else getattr(p, f) for f in FIELDS) for p in pools
    ]
    rows[0] = (*rows[0][:7], None, *rows[0][8:])  # a NULL GPU count is none
    assert PoolList.from_rows(rows) == PoolList.of(pools)
    assert len(PoolList.from_rows([])) == 0


def test_it_pickles_as_columns() -> None:
    pl = PoolList.of(_pools())
    _ = pl[0]
    back = pickle.loads(pickle.dumps(pl))
    assert back == pl and list(back) == list(pl)
    assert b"Pool\n" not in pickle.dumps(pl, protocol=0)  # no Pool objects in the stream


def test_columns_must_agree() -> None:
    with pytest.raises(ValueError, match="columns"):
        PoolList([("a",)] * (len(FIELDS) - 1))
    with pytest.raises(ValueError, match="length"):
        PoolList([("a", "b")] + [("a",)] * (len(FIELDS) - 1))
