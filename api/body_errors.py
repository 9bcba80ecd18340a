"""Plain-language answers for bodies that are not a JSON document at all.

FastAPI reports a JSON syntax error as a field named by a character offset
(`loc ["body", 28]`, "JSON decode error"), bytes that are not UTF-8 and arrays or objects
nested deeper than Python's JSON parser goes (its RecursionError) as a bare 400, and a body
sent without a JSON content type (curl's `-d` default is a form) as "Input should be a valid
dictionary". All of them become the same answer as any other invalid body: 422
problem+json whose single error is at `["body"]` and says what is wrong and where.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request


def _at(doc: str, pos: int) -> str:
    line = doc.count("\n", 0, pos) + 1
    column = pos - (doc.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {column}"


def not_a_json_document(exc: RequestValidationError, request: Request) -> tuple[str, list[dict[str, Any]]] | None:
    """(detail, errors) when the body failed before any field could be read, else None."""
    errors = list(exc.errors())
    if len(errors) != 1:
        return None
    e = errors[0]
    loc = tuple(e.get("loc", ()))
    if e.get("type") == "json_invalid" and len(loc) == 2 and isinstance(loc[1], int) and isinstance(exc.body, str):
        why = str((e.get("ctx") or {}).get("error", "invalid JSON"))
        msg = f"the body is not valid JSON: {why} at {_at(exc.body, loc[1])}"
        return msg, [{"loc": ["body"], "msg": msg, "type": "json_invalid"}]
    if loc == ("body",) and isinstance(e.get("input"), bytes):
        # the body was not parsed as JSON: its content type is not application/json
        got = request.headers.get("content-type") or "none"
        msg = f"send the body as JSON with Content-Type: application/json (got Content-Type: {got})"
        return msg, [{"loc": ["body"], "msg": msg, "type": "content_type"}]
    return None


def too_deep() -> tuple[str, list[dict[str, Any]]]:
    """(detail, errors) for a JSON body whose arrays or objects nest deeper than the parser goes
    (json.loads' RecursionError, around a thousand levels); no request document nests like that."""
    msg = "the body is not a JSON document the broker reads: its arrays or objects are nested too deeply"
    return msg, [{"loc": ["body"], "msg": msg, "type": "json_too_deep"}]


def unreadable(exc: HTTPException) -> tuple[str, list[dict[str, Any]]] | None:
    """(detail, errors) when FastAPI could not read the body (its bare 400), else None: bytes that
    are not UTF-8, or JSON nested too deeply."""
    cause = exc.__cause__
    if exc.status_code != 400:
        return None
    if isinstance(cause, RecursionError):
        return too_deep()
    if not isinstance(cause, UnicodeDecodeError):
        return None
    msg = f"the body is not valid UTF-8 (byte 0x{cause.object[cause.start]:02x} at offset {cause.start})"
    return msg, [{"loc": ["body"], "msg": msg, "type": "utf8_invalid"}]
