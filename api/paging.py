"""The query parameters of every paginated list, bounded so the database can take them.

An offset past a 64-bit integer overflowed PostgreSQL's OFFSET (a bigint) into a 500. No
table reaches that many rows, so the bound refuses nothing a client could mean.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

MAX_OFFSET = 2**63 - 1  # PostgreSQL's bigint, SQLite's INTEGER

Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="items to skip (at most 2^63-1)")]
