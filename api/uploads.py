"""Bodies a client uploads either as CSV rows or as a JSON document (usage samples, RTT measurements)."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.requests import Request

from api.body_errors import too_deep
from broker.errors import InvalidRequest

M = TypeVar("M", bound=BaseModel)


def csv_or_json_body(model: type[BaseModel], csv_example: str, *, by_alias: bool = False) -> dict[str, Any]:
    """The route's `openapi_extra`: a required body, `model` as JSON or its rows as CSV."""
    return {
        "requestBody": {
            "content": {
                "application/json": {"schema": model.model_json_schema(by_alias=by_alias)},
                "text/csv": {"schema": {"type": "string", "example": csv_example}},
            },
            "required": True,
        }
    }


async def read_upload(request: Request) -> tuple[bytes, bool]:
    """(the body, whether it is CSV); any other content type is read as JSON."""
    raw = await request.body()  # at most BROKER_MAX_BODY_BYTES: ServiceMiddleware answers 413 beyond
    return raw, "csv" in request.headers.get("content-type", "application/json")


def json_document(model: type[M], raw: bytes, what: str) -> M:
    """`raw` validated as `model`; otherwise InvalidRequest ("<what> is invalid") naming each bad field."""
    try:
        return model.model_validate(json.loads(raw or b"null"))
    except RecursionError as exc:  # nested deeper than json.loads goes: what FastAPI's own bodies answer
        raise InvalidRequest(*too_deep()) from exc
    except (ValueError, TypeError) as exc:
        errors = getattr(exc, "errors", None)
        detail = (
            [{"loc": ["body", *e["loc"]], "msg": e["msg"]} for e in errors(include_url=False)]
            if callable(errors)
            else [{"loc": ["body"], "msg": str(exc)}]
        )
        where = ", ".join(".".join(str(p) for p in e["loc"]) for e in detail[:3])
        raise InvalidRequest(f"{what} is invalid: {where}", errors=detail) from exc
