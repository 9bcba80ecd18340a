"""Every id the broker mints: one function per kind, each its kind's prefix and a ULID.

A ULID (48-bit millisecond timestamp, 80 random bits, Crockford base32) sorts in the order the
ids were made and any ULID decoder reads the time from it. Ids minted before this module (jobs,
simulations and price refreshes had a hex time and random hex) stay valid: no code reads an id's
shape, only its prefix in messages.
"""

from __future__ import annotations

from ulid import ULID


def _minted(prefix: str) -> str:
    return f"{prefix}_{ULID()}"


def new_placement_id() -> str:
    """A stored placement: 'pl_…'."""
    return _minted("pl")


def new_replan_id() -> str:
    """A stored re-plan decision: 'rp_…'."""
    return _minted("rp")


def new_dispatch_id() -> str:
    """A dispatch of a placement to its clusters: 'dp_…'."""
    return _minted("dp")


def new_job_id() -> str:
    """An asynchronous job: 'job_…'."""
    return _minted("job")


def new_simulation_id() -> str:
    """A fleet simulation: 'sim_…'."""
    return _minted("sim")


def new_price_refresh_id() -> str:
    """A price refresh job: 'prj_…'."""
    return _minted("prj")
