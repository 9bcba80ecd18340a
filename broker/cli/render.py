"""Human renderings of a placement document: a rich table and a pull-request comment.

The pull-request comment (`broker place --format markdown`) is what a CI/CD
gate posts: the plan, its cost and savings, what changed against the stored
placement of the same name, residency and latency checks and the cost gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from broker.core.domain import HOURS_PER_MONTH, Site
from broker.core.residency import resolve_policy


def _money(x: float | None) -> str:
    """A rate per hour: to the hundredth of a cent, as providers quote them ($0.0047/h)."""
    return "n/a" if x is None else f"${x:,.4f}"


def _cents(x: float | None) -> str:
    """An amount (a month's cost): to the cent."""
    return "n/a" if x is None else f"${x:,.2f}"


def split_pool(pool: str) -> tuple[str, str, str]:
    """`<site>/<instance-type>/<capacity-type>` in its three parts (a pool id from elsewhere: all site)."""
    parts = pool.rsplit("/", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else (pool, "", "")


def _binding_by_workload(doc: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each workload's binding constraints, once each over its rows, without the ` on <workload>`
    the line already says (a pool's capacity names the pool)."""
    out: dict[str, list[str]] = {}
    for a in doc["assignments"]:
        seen = out.setdefault(str(a["workload"]), [])
        for b in a["explanation"]["binding"]:
            label = str(b).removesuffix(f" on {a['workload']}")
            if label not in seen:
                seen.append(label)
    return out


def render_table(console: Console, doc: dict[str, Any]) -> None:
    # the pool in its parts: the instance and capacity types are what a reader looks for, so they
    # never wrap or shorten (the site folds onto a second line instead); the binding constraints,
    # long and the same on a workload's rows, follow the table once per workload. 80 columns
    # keep every part of a typical row whole
    t = Table(title=f"{doc.get('name') or 'placement'}  [{doc['status']}]", show_lines=False)
    t.add_column("workload", overflow="fold")
    t.add_column("n", justify="right", no_wrap=True)
    t.add_column("instance", no_wrap=True)
    t.add_column("capacity", no_wrap=True)
    t.add_column("site", overflow="fold", min_width=6)
    t.add_column("USD/h", justify="right", no_wrap=True)
    for a in doc["assignments"]:
        site, instance, capacity = split_pool(str(a["pool"]))
        t.add_row(
            escape(a["workload"]),
            str(a["replicas"]),
            escape(instance),
            escape(capacity),
            escape(site),
            f"{a['explanation']['cost_per_hour']:.4f}",
        )
    console.print(t)
    for workload, labels in _binding_by_workload(doc).items():
        if labels:
            console.print(f"  {escape(workload)} bound by: {escape(', '.join(labels))}")
    base = doc["baseline"]["cost_per_hour"]
    savings = "n/a" if doc["savings_pct"] is None else f"{doc['savings_pct']}"
    monthly = doc.get("cost_per_month", doc["cost_per_hour"] * HOURS_PER_MONTH)
    console.print(
        f"cost {_money(doc['cost_per_hour'])}/h ({_cents(monthly)}/month)  "
        f"lower bound {_money(doc['lower_bound_per_hour'])}/h  gap {doc['gap_pct']:.2f}%  "
        f"baseline ({doc['baseline']['policy']}) {_money(base)}/h  savings {savings}%  "
        f"solved in {doc['solve_ms']} ms"
    )
    nodes = doc.get("nodes") or []
    packing = doc.get("packing")
    if packing:  # every replica on a concrete node (extension): the node counts dispatch needs
        console.print(
            f"nodes {sum(int(n['count']) for n in nodes)} in {len(nodes)} pools, packed replica by replica "
            f"({packing['aggregate_nodes']} by the aggregate capacity rule; "
            f"{packing['pools_proven']} of {packing['pools']} pools proven minimal)"
        )
    for w in doc.get("warnings") or []:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", soft_wrap=True)
    if doc.get("id"):
        console.print(f"stored as {doc['id']}")


def _signed_money(x: float, digits: int = 4) -> str:
    """A change of a rate (4 digits) or of an amount (`digits=2`: cents)."""
    return ("+" if x > 0 else "-" if x < 0 else "±") + f"${abs(x):,.{digits}f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}%"


def _cell(text: str) -> str:
    """Markdown table cells cannot hold pipes or newlines."""
    return text.replace("|", "\\|").replace("\n", " ")


def _by_workload_pool(doc: Mapping[str, Any]) -> dict[tuple[str, str], tuple[int, float]]:
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for a in doc.get("assignments", []):
        key = (str(a["workload"]), str(a["pool"]))
        reps, cost = out.get(key, (0, 0.0))
        out[key] = (reps + int(a["replicas"]), cost + float(a["explanation"]["cost_per_hour"]))
    return out


def diff_lines(doc: Mapping[str, Any], previous: Mapping[str, Any]) -> list[str]:
    """What moved per workload and pool between the stored placement and this one."""
    old, new = _by_workload_pool(previous), _by_workload_pool(doc)
    rows = []
    for key in sorted(set(old) | set(new)):
        (r0, c0), (r1, c1) = old.get(key, (0, 0.0)), new.get(key, (0, 0.0))
        if r0 == r1 and abs(c1 - c0) < 5e-7:
            continue
        change = "added" if r0 == 0 else "removed" if r1 == 0 else "changed"
        rows.append(f"| {change} | {_cell(key[0])} | `{key[1]}` | {r0} → {r1} | {_signed_money(c1 - c0)} |")
    if not rows:
        return ["No change in workloads or pools against the stored placement.", ""]
    return ["| change | workload | pool | replicas | USD/h |", "|---|---|---|---:|---:|", *rows, ""]


def residency_lines(doc: Mapping[str, Any], request: Mapping[str, Any], sites: Mapping[str, Site] | None) -> list[str]:
    """Each workload's residency policy against the countries of the sites it runs in."""
    rows = []
    for w in request.get("workloads", []):
        res = w.get("residency")
        if res is None:
            continue
        used = sorted({str(a["site"]) for a in doc.get("assignments", []) if a["workload"] == w["name"]})
        label = res if isinstance(res, str) else "inline policy"
        if sites is None:
            rows.append(f"| {_cell(w['name'])} | {label} | {', '.join(used)} | enforced by the server's solver |")
            continue
        policy = resolve_policy(res)
        bad = [s for s in used if s in sites and not policy.allows(sites[s])]
        countries = ", ".join(f"{s} ({sites[s].country})" if s in sites else s for s in used)
        verdict = "✅ pass" if not bad else f"❌ outside the policy: {', '.join(bad)}"
        rows.append(f"| {_cell(w['name'])} | {label} | {countries} | {verdict} |")
    if not rows:
        return []
    return ["**Residency**", "", "| workload | policy | sites | check |", "|---|---|---|---|", *rows, ""]


def latency_lines(doc: Mapping[str, Any], request: Mapping[str, Any]) -> list[str]:
    """Each latency SLO against the worst round trip of the sites the workload runs in."""
    rows = []
    for w in request.get("workloads", []):
        for region, slo in (w.get("latency_slo_ms") or {}).items():
            seen = [
                float(a["latency_ms"][region])
                for a in doc.get("assignments", [])
                if a["workload"] == w["name"] and region in a.get("latency_ms", {})
            ]
            worst = max(seen) if seen else None
            ok = worst is not None and worst <= float(slo) + 1e-9
            shown = "unknown" if worst is None else f"{worst:g} ms"
            rows.append(
                f"| {_cell(w['name'])} | {_cell(region)} | ≤ {float(slo):g} ms | {shown} | "
                f"{'✅ pass' if ok else '❌ fail'} |"
            )
    if not rows:
        return []
    return [
        "**Latency SLOs**",
        "",
        "| workload | users | SLO | worst RTT | check |",
        "|---|---|---:|---:|---|",
        *rows,
        "",
    ]


def gate_lines(
    doc: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    *,
    max_cost_per_hour: float | None,
    max_increase_pct: float | None,
) -> list[str]:
    rows = []
    cost = float(doc["cost_per_hour"])
    if max_cost_per_hour is not None:
        ok = cost <= max_cost_per_hour + 1e-9
        rows.append(f"| cost ≤ ${max_cost_per_hour:g}/h | {_money(cost)}/h | {'✅ pass' if ok else '❌ over'} |")
    if max_increase_pct is not None:
        if previous is None or float(previous["cost_per_hour"]) <= 0:
            rows.append(f"| increase ≤ {max_increase_pct:g}% | no stored placement to compare | ✅ pass |")
        else:
            inc = (cost - float(previous["cost_per_hour"])) / float(previous["cost_per_hour"]) * 100
            ok = inc <= max_increase_pct + 1e-9
            rows.append(f"| increase ≤ {max_increase_pct:g}% | {inc:+.1f}% | {'✅ pass' if ok else '❌ over'} |")
    if not rows:
        return []
    return ["**Cost gate**", "", "| rule | value | result |", "|---|---:|---|", *rows, ""]


def render_markdown(
    doc: dict[str, Any],
    *,
    previous: dict[str, Any] | None = None,
    request: Mapping[str, Any] | None = None,
    sites: Mapping[str, Site] | None = None,
    max_cost_per_hour: float | None = None,
    max_increase_pct: float | None = None,
) -> str:
    """A pull-request comment: summary, change against the stored placement, checks, plan."""
    cost = float(doc["cost_per_hour"])
    base = doc["baseline"]["cost_per_hour"]
    saved_h = (float(base) - cost) if base is not None else None
    lines = [f"### Placement `{doc.get('name', '')}` — {doc['status']}", ""]
    lines += [
        "| cost / h | cost / month | baseline / h | savings / month | savings | lower bound / h | gap |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {_money(cost)} | {_cents(cost * HOURS_PER_MONTH)} | {_money(base)} | "
        f"{_cents(None if saved_h is None else saved_h * HOURS_PER_MONTH)} | {_pct(doc['savings_pct'])} | "
        f"{_money(doc['lower_bound_per_hour'])} | {doc['gap_pct']:.2f}% |",
        "",
        f"Baseline: `{doc['baseline']['policy']}`"
        + "".join(
            f"; `{b['policy']}` {_money(b['cost_per_hour'])}/h ({_pct(b['savings_pct'])})"
            for b in (doc.get("baselines") or [])[1:]
        ),
        "",
    ]
    warnings = doc.get("warnings") or []
    if warnings:  # right under the figures they qualify
        lines += [*(f"> :warning: {_cell(w)}" for w in warnings), ""]
    if previous is not None:
        prev = float(previous["cost_per_hour"])
        delta = cost - prev
        pct = (delta / prev * 100) if prev else 0.0
        lines += [
            f"**Against stored placement `{previous.get('id')}`**: {_money(prev)}/h → {_money(cost)}/h "
            f"({'+' if delta >= 0 else ''}{pct:.1f}%, {_signed_money(delta * HOURS_PER_MONTH, 2)}/month).",
            "",
            *diff_lines(doc, previous),
        ]
    else:
        lines += ["No stored placement of this name yet: everything below is new.", ""]
    lines += gate_lines(doc, previous, max_cost_per_hour=max_cost_per_hour, max_increase_pct=max_increase_pct)
    if request is not None:
        lines += residency_lines(doc, request, sites)
        lines += latency_lines(doc, request)
    lines += [
        "**Plan**",
        "",
        "| workload | replicas | pool | USD/h | latency ms | binding |",
        "|---|---:|---|---:|---|---|",
    ]
    for a in doc["assignments"]:
        ex = a["explanation"]
        lat = ", ".join(f"{k}: {v:g}" for k, v in a["latency_ms"].items()) or "-"
        lines.append(
            f"| {_cell(a['workload'])} | {a['replicas']} | `{a['pool']}` | {ex['cost_per_hour']:.4f} | {lat} | "
            f"{_cell(', '.join(ex['binding'])) or '-'} |"
        )
    nodes = doc.get("nodes") or []
    if nodes:
        lines += [
            "",
            "<details><summary>Nodes to provision</summary>",
            "",
            "| pool | nodes | USD/h |",
            "|---|---:|---:|",
        ]
        lines += [f"| `{n['pool']}` | {n['count']} | {float(n['cost_per_hour']):.4f} |" for n in nodes]
        lines += ["", "</details>"]
    return "\n".join(lines)


# A gate that fails before there is a plan still posts a comment: the pipeline that posts stdout
# as a pull-request comment would otherwise post an empty one (exit 2, 3 and 4 with --format markdown).


def _failed_heading(name: str, what: str) -> list[str]:
    return [f"### Placement `{name}` — ❌ {what}", ""]


def render_infeasible_markdown(name: str, detail: str, conflicts: list[str]) -> str:
    """Exit 3: no plan keeps every hard constraint; the conflicting set says which to relax."""
    lines = _failed_heading(name, "infeasible")
    lines += [f"No placement satisfies every hard constraint: {_cell(detail)}", ""]
    if conflicts:
        lines += ["**Conflicting constraints** (relaxing any one of them may make it feasible)", ""]
        lines += [f"- `{c}`" for c in conflicts]
    return "\n".join(lines)


def _usd(x: Any) -> str:
    if not isinstance(x, int | float):
        return "n/a"
    return f"{'-' if x < 0 else ''}${abs(x):,.2f}"


def render_over_budget_markdown(name: str, detail: str, budget: Mapping[str, Any] | None) -> str:
    """Exit 4 over a budget: the budget's figures per month, as the API's over-budget problem has them."""
    lines = _failed_heading(name, "over budget")
    lines += [_cell(detail), ""]
    if budget:
        scope = f"team `{budget['team']}`" if budget.get("team") else "tenant"
        lines += [
            "| budget | monthly budget | committed | this placement | projected | remaining |",
            "|---|---:|---:|---:|---:|---:|",
            f"| {scope} | {_usd(budget.get('monthly_usd'))} | {_usd(budget.get('used'))} | "
            f"{_usd(budget.get('this_placement'))} | {_usd(budget.get('projected'))} | "
            f"{_usd(budget.get('remaining'))} |",
        ]
    return "\n".join(lines)


def render_invalid_markdown(name: str, detail: str, errors: list[dict[str, Any]]) -> str:
    """Exit 2: the request (or its file) is not valid; each offending field."""
    lines = _failed_heading(name, "invalid request")
    lines += [_cell(detail), ""]
    for e in errors:
        loc = ".".join(str(p) for p in e.get("loc", []))
        lines.append(f"- `{loc}`: {_cell(str(e.get('msg', '')))}")
    return "\n".join(lines)
