"""Instance requirements written as a Kubernetes label selector, for query strings (`GET /v1/pools`).

The syntax `kubectl -l` accepts: clauses joined by commas, each one of `key in (a,b)`,
`key notin (a,b)`, `key`, `!key`, `key=v` (or `==`), `key!=v`, `key>n`, `key<n`. Pure.
"""

from __future__ import annotations

import re

from broker.core.requirements import Operator, Requirement, RequirementError

_SET = re.compile(r"^\s*(?P<key>[^\s!=<>(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_CMP = re.compile(r"^\s*(?P<key>[^\s!=<>(),]+)\s*(?P<op>==|!=|=|>|<)\s*(?P<value>[^\s!=<>(),]+)\s*$")
_HAS = re.compile(r"^\s*(?P<not>!?)\s*(?P<key>[^\s!=<>(),]+)\s*$")

_OPS = {"in": Operator.IN, "notin": Operator.NOT_IN, "=": Operator.IN, "==": Operator.IN}
_OPS |= {"!=": Operator.NOT_IN, ">": Operator.GT, "<": Operator.LT}


def clauses(selector: str) -> list[str]:
    """The selector split at the commas outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(selector[start:i])
            start = i + 1
    out.append(selector[start:])
    return out


def parse_clause(clause: str) -> Requirement:
    """One clause as a requirement (RequirementError says what is wrong)."""
    if m := _SET.match(clause):
        values = [v.strip() for v in m["values"].split(",") if v.strip()]
        return Requirement.parse(m["key"], _OPS[m["op"]].value, values)
    if m := _CMP.match(clause):
        return Requirement.parse(m["key"], _OPS[m["op"]].value, [m["value"]])
    if m := _HAS.match(clause):
        op = Operator.DOES_NOT_EXIST if m["not"] else Operator.EXISTS
        return Requirement.parse(m["key"], op.value)
    raise RequirementError(
        f"{clause.strip()!r} is not a selector clause "
        "(key in (a,b), key notin (a), key, !key, key=v, key!=v, key>n, key<n)"
    )
