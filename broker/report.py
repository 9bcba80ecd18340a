"""Human renderings of a placement document: a rich table and a pull-request comment."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.4f}"


def render_table(console: Console, doc: dict[str, Any]) -> None:
    t = Table(title=f"{doc.get('name') or 'placement'}  [{doc['status']}]", show_lines=False)
    for col in ("workload", "replicas", "pool", "USD/h", "binding"):
        t.add_column(col, justify="right" if col in ("replicas", "USD/h") else "left")
    for a in doc["assignments"]:
        ex = a["explanation"]
        t.add_row(
            a["workload"],
            str(a["replicas"]),
            a["pool"],
            f"{ex['cost_per_hour']:.4f}",
            escape(", ".join(ex["binding"])),
        )
    console.print(t)
    base = doc["baseline"]["cost_per_hour"]
    savings = "n/a" if doc["savings_pct"] is None else f"{doc['savings_pct']}"
    console.print(
        f"cost {_money(doc['cost_per_hour'])}/h ({_money(doc['cost_per_hour'] * 730)}/month)  "
        f"lower bound {_money(doc['lower_bound_per_hour'])}/h  gap {doc['gap_pct']:.2f}%  "
        f"baseline {_money(base)}/h  savings {savings}%  "
        f"solved in {doc['solve_ms']} ms"
    )
    if doc.get("id"):
        console.print(f"stored as {doc['id']}")


def render_markdown(doc: dict[str, Any], *, previous: dict[str, Any] | None = None) -> str:
    """A pull-request comment: summary, table, and the change against the stored placement."""
    lines = [f"### Placement `{doc.get('name', '')}` — {doc['status']}", ""]
    base = doc["baseline"]["cost_per_hour"]
    lines += [
        "| cost / h | cost / month | lower bound / h | gap | baseline / h | savings |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {_money(doc['cost_per_hour'])} | {_money(doc['cost_per_hour'] * 730)} | "
        f"{_money(doc['lower_bound_per_hour'])} | {doc['gap_pct']:.2f}% | {_money(base)} | "
        f"{doc['savings_pct'] if doc['savings_pct'] is not None else 'n/a'}% |",
        "",
    ]
    if previous is not None:
        prev = float(previous["cost_per_hour"])
        delta = doc["cost_per_hour"] - prev
        pct = (delta / prev * 100) if prev else 0.0
        lines += [
            f"Compared with stored placement `{previous.get('id')}`: {_money(prev)}/h → "
            f"{_money(doc['cost_per_hour'])}/h ({'+' if delta >= 0 else ''}{pct:.1f}%).",
            "",
        ]
    lines += ["| workload | replicas | pool | USD/h | latency ms | binding |", "|---|---:|---|---:|---|---|"]
    for a in doc["assignments"]:
        ex = a["explanation"]
        lat = ", ".join(f"{k}: {v:g}" for k, v in a["latency_ms"].items()) or "-"
        lines.append(
            f"| {a['workload']} | {a['replicas']} | `{a['pool']}` | {ex['cost_per_hour']:.4f} | {lat} | "
            f"{', '.join(ex['binding']) or '-'} |"
        )
    return "\n".join(lines)
