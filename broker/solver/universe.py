"""The universe: every candidate (class, pool) column of a request, also grouped by pool.

Columns are numbered class by class (model.XColumns); `order` lists them pool by pool, so
per-pool maxima (pricing) and "every column on these pools" (growing the master, the
bound) are segment operations. Per-column arrays are 32-bit: 20,000 workloads make
70.8 M columns, and each extra per-column array costs 283 MB there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from broker.pooltable import IntArray
from broker.solver.model import Index, Layout, ModelInput, XColumns, ranges, x_columns

CHUNK = 1 << 20  # columns per numpy pass over the whole universe: temporaries of a few MB


@dataclass
class Universe:
    cols: XColumns
    order: Index  # columns sorted by pool
    starts: IntArray  # segment starts in `order`
    seg_pool: IntArray  # pool of each segment
    seg_of_pool: IntArray  # per catalog pool: its segment, -1 = none

    @property
    def size(self) -> int:
        return self.cols.size

    def pool_columns(self, p: int) -> Index:
        """The universe columns on pool p."""
        return self.columns_on(np.array([p]))

    def columns_on(self, pools: IntArray) -> Index:
        """The universe columns on the catalog pools `pools` (pool by pool)."""
        segs = self.seg_of_pool[pools]
        segs = segs[segs >= 0]
        ends = np.r_[self.starts[1:], len(self.order)]
        out: Index = self.order[ranges(self.starts[segs], ends[segs] - self.starts[segs])]
        return out

    def segment_chunks(self) -> Iterator[tuple[slice, IntArray]]:
        """(positions in `order`, the segment starts inside them, relative) in chunks of whole
        segments of about CHUNK columns: reduceat over a chunk covers its segments exactly."""
        n, k = len(self.order), 0
        while k < len(self.starts):
            a = int(self.starts[k])
            # the first segment that starts at or after a + CHUNK ends this chunk (at least one segment)
            stop = max(k + 1, int(np.searchsorted(self.starts, a + CHUNK, side="left")))
            b = int(self.starts[stop]) if stop < len(self.starts) else n
            yield slice(a, b), self.starts[k:stop] - a
            k = stop


def make_universe(mi: ModelInput, lay: Layout) -> Universe:
    cols = x_columns(mi, lay)
    # pools fit 16 bits on the pruned public catalog: numpy then sorts by radix, ~10x faster
    key = cols.pool.astype(np.uint16) if mi.n_pools < 1 << 16 else cols.pool
    order: Index = np.argsort(key, kind="stable").astype(np.int32 if cols.size < 1 << 31 else np.int64)
    del key
    sp = cols.pool[order]
    starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]]) if len(sp) else np.zeros(0, dtype=np.int64)
    seg_pool = sp[starts].astype(np.int64) if len(sp) else np.zeros(0, dtype=np.int64)
    del sp
    seg_of_pool = np.full(mi.n_pools, -1, dtype=np.int64)
    seg_of_pool[seg_pool] = np.arange(len(seg_pool))
    return Universe(
        cols=cols,
        order=order,
        starts=starts,
        seg_pool=seg_pool,
        seg_of_pool=seg_of_pool,
    )
