"""The universe: every candidate (class, pool) column of a request, also grouped by pool.

Columns are numbered class by class (columns.XColumns); `order` lists them pool by pool, so
per-pool maxima (reduced costs) and "every column on these pools" (growing the master, the
bound) are segment operations. Per-column arrays are 32-bit: an enterprise-sized request has
tens of millions of columns, and every extra per-column array costs hundreds of MB there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from broker.core.pooltable import IntArray
from broker.solver.model.columns import Index, XColumns, ranges, x_columns
from broker.solver.model.layout import Layout, ModelInput

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
    # class-by-class to pool-by-pool is a CSR -> CSC conversion: scipy's counting sort, stable
    # within a pool, one pass (about twice as fast as an argsort and its int32 copy)
    idx = np.int32 if cols.size < 1 << 31 else np.int64
    by_class = sp.csr_matrix(
        (np.arange(cols.size, dtype=idx), cols.pool, cols.starts.astype(idx)), shape=(len(mi.classes), mi.n_pools)
    )
    by_pool = by_class.tocsc()
    del by_class
    order: Index = by_pool.data
    seg_pool = np.flatnonzero(np.diff(by_pool.indptr)).astype(np.int64)
    starts = by_pool.indptr[seg_pool].astype(np.int64)
    del by_pool
    seg_of_pool = np.full(mi.n_pools, -1, dtype=np.int64)
    seg_of_pool[seg_pool] = np.arange(len(seg_pool))
    return Universe(
        cols=cols,
        order=order,
        starts=starts,
        seg_pool=seg_pool,
        seg_of_pool=seg_of_pool,
    )
