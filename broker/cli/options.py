"""Checks on the numeric options of every `broker` command, so a bad value is exit 2 naming the option.

click's FLOAT parses `nan` and `inf`, and its `min=` lets NaN through (every comparison with NaN is
false): a gate `--max-cost-per-hour nan` would pass every plan. Each float option that is an amount,
a limit or a duration therefore takes `callback=at_least(...)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Annotated

import typer


def at_least(minimum: float = 0.0, meaning: str = "") -> Callable[[float | None], float | None]:
    """An option callback refusing NaN, infinities and values below `minimum` (click's usage error:
    exit 2, EXIT_INVALID, with the option's name). `meaning`: what the minimum is, said with it."""

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value) or value < minimum:
            # click names the option in the message (it adds the parameter to a callback's error)
            said = f" ({meaning})" if meaning else ""
            raise typer.BadParameter(f"must be a finite number ≥ {minimum:g}{said}, not {value:g}")
        return value

    return check


def api_time(value: str | None, option: str) -> datetime | None:
    """A --from/--to parsed as the API parses its ?from=/?to=: with their type, broker.finops.service's
    WindowTime (an ISO 8601 date or date-time, or Unix seconds; naive is UTC), so the command and
    `GET /v1/...` take the same values. Not one: exit 2 naming the option (click's usage error)."""
    if value is None:
        return None
    from pydantic import TypeAdapter, ValidationError

    from broker.finops.service import WindowTime

    try:
        return TypeAdapter(WindowTime).validate_python(value)
    except ValidationError as exc:
        raise typer.BadParameter(f"{value!r}: {exc.errors()[0]['msg']}", param_hint=f"'{option}'") from exc


def tenant_name(value: str | None) -> str | None:
    """A --tenant as the API's keys spell tenants (lowercase letters, digits, '.', '_', '-');
    another: exit 2 naming the option."""
    if value is None:
        return None
    from broker.access.keys import TENANT_RE

    if not TENANT_RE.match(value):
        raise typer.BadParameter(f"invalid tenant name {value!r} (lowercase letters, digits, '.', '_', '-')")
    return value


# The one --tenant of every command that reads or writes a tenant's records (placements, clusters,
# dispatches, budgets, keys, usage, models, latency measurements): the tenant an API key acts for.
# A command gives it a default ("default", the embedded tenant) or none (required).
Tenant = Annotated[
    str,
    typer.Option(
        "--tenant",
        callback=tenant_name,
        help="the tenant whose records the command reads or writes (an API key's tenant; embedded runs: default)",
    ),
]

# The window of the ledger's reports (finops savings, export focus), read by api_time as the API
# reads its ?from= / ?to=
WindowFrom = Annotated[
    str | None,
    typer.Option("--from", help="window start: ISO 8601 date or time, or Unix seconds (default: --to - 30 days)"),
]
WindowTo = Annotated[str | None, typer.Option("--to", help="window end, exclusive, as --from (default: now)")]
