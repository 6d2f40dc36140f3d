"""One error body for every 4xx and 5xx: `{"detail": str, "code": str, "errors"?: [...]}` (docs/api.md).

The handlers here are the only place an error becomes an HTTP answer: the service's own errors (their
`status_code` and `error_code`), FastAPI's validation errors, Starlette's HTTP errors (404 of an unknown path, 405)
and anything unexpected (500). The ASGI middlewares that answer before the app runs (the Host check, the body
limit) build the same body with `error_body`.

`responses(...)` is what a route declares of its own (404, 409); `document(app)` adds to every route's OpenAPI the
errors every route can answer, so each route documents exactly its errors. `install(app)` registers the handlers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.core.errors import (
    DependencyUnavailable,
    RateLimited,
    SchemaError,
    ServiceError,
    Unauthorized,
    validation_message,
)
from service.schemas.memories import TOO_LARGE  # a schema error of this type is a size limit: 413

log = structlog.get_logger(__name__)

# The `code` of each status when the error names none of its own.
CODES: dict[int, str] = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}


class ErrorBody(BaseModel):
    """Every error answer. `errors` lists the fields of a schema error (422), each with `loc`, `type`, `msg`."""

    detail: str = Field(description="What went wrong, in words (names the limit or the valid values)")
    code: str = Field(description="Machine-readable kind: " + ", ".join(sorted(set(CODES.values()))) +
                                  ", or a more specific one (docs/api.md)")
    errors: list[dict[str, Any]] | None = None


DESCRIPTIONS: dict[int, str] = {
    400: "A domain rule is broken (the detail names it and the valid values), or the Host header is not allowed",
    401: "No API key, or a malformed, unknown or revoked one",
    403: "The key may not do this (another user_id, an admin-only route)",
    404: "Unknown id (ids of other tenants are unknown too)",
    409: "Conflicts with the current state (the detail says which)",
    413: "Body over MAX_BODY_BYTES (MAX_IMPORT_BYTES for an import), or a field over its size limit",
    422: "The request breaks its schema (`errors` lists the fields), or an Idempotency-Key reused with another "
         "request",
    429: "Rate limit reached; see Retry-After",
    503: "A dependency (Redis, a store) is unavailable; retry with the same Idempotency-Key",
}

# What every route can answer: the Host check (400) and the body limit (413) run before any route.
COMMON = (400, 413)
# Routes behind the API-key dependency (not PUBLIC_PATHS): a key is checked in Redis (401, 503), may not do this
# (403), or is over its rate (429).
GUARDED = (401, 403, 429, 503)
ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def error_body(status: int, detail: str, code: str | None = None, errors: Sequence[Any] | None = None) -> bytes:
    body: dict[str, Any] = {"detail": detail, "code": code or CODES.get(status, f"http_{status}")}
    if errors:
        body["errors"] = jsonable_encoder(list(errors))
    return json.dumps(body, separators=(",", ":")).encode()


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """What a route declares beyond what every route gets (`document`): the statuses only it can answer, such as
    404 for an id or 409 for a conflict, each with the one error body. Use: `@router.get(..., responses=
    responses(404))`."""
    return {s: {"model": ErrorBody, "description": DESCRIPTIONS[s]} for s in sorted(set(statuses))}


def document(app: FastAPI, public: frozenset[str]) -> None:
    """The OpenAPI of every route (including routes added later) names exactly the errors it can answer: COMMON,
    422 when it takes parameters or a body, GUARDED unless its path is public, and what it declares with
    `responses(...)`; every error with the ErrorBody schema (FastAPI's own validation schema replaced)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = generate()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["ErrorBody"] = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
        for path, ops in schema.get("paths", {}).items():
            for op in ops.values():
                answers = op.setdefault("responses", {})
                wanted = set(COMMON) | (set() if path in public else set(GUARDED))
                if op.get("parameters") or op.get("requestBody"):
                    wanted.add(422)
                for status in sorted(wanted | {int(s) for s in answers if s.isdigit() and int(s) >= 400}):
                    current = answers.get(str(status), {})
                    ref = current.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
                    if ref and not ref.endswith(("/HTTPValidationError", "/ErrorBody")):
                        continue  # an error with its own documented body (/health's 503)
                    answers[str(status)] = {"description": DESCRIPTIONS.get(status, current.get("description", "")),
                                            "content": {"application/json": {"schema": ERROR_REF}}}
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _response(status: int, detail: str, code: str | None = None, errors: Sequence[Any] | None = None,
              headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(json.loads(error_body(status, detail, code, errors)), status_code=status, headers=headers)


def _where(loc: Sequence[Any]) -> str:
    return ".".join(str(p) for p in loc) or "request"


def summary(errors: Sequence[dict[str, Any]]) -> str:
    """One line naming the first field and how many more."""
    if not errors:
        return "the request breaks its schema"
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{_where(first.get('loc', ()))}: {first.get('msg', 'invalid')}{more}"


async def service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    log.info("request_rejected", status=exc.status_code, detail=str(exc), path=request.url.path)
    headers: dict[str, str] = {}
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    errors = exc.errors if isinstance(exc, SchemaError) else None
    public = exc.public if isinstance(exc, DependencyUnavailable) and exc.public else str(exc)
    return _response(exc.status_code, public, exc.error_code, errors, headers)


def _worded(error: dict[str, Any], body: Any) -> dict[str, Any]:
    """A schema error as the answer lists it (loc, type, msg), its message in words (service/core/errors.py
    `validation_message`); invalid JSON says where, by line and column of the body, instead of a character
    offset in `loc`."""
    loc: list[Any] = list(error.get("loc", ()))
    message = validation_message(error)
    if error.get("type") == "json_invalid" and len(loc) == 2 and isinstance(loc[1], int) and isinstance(body, str):
        pos = loc[1]
        line = body.count("\n", 0, pos) + 1
        column = pos - (body.rfind("\n", 0, pos) + 1) + 1
        loc = ["body"]
        message += f" at line {line}, column {column}"
    return {"loc": loc, "type": error.get("type"), "msg": message}


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_worded(e, exc.body) for e in exc.errors()]
    too_large = [e for e in errors if e.get("type") == TOO_LARGE]
    status = 413 if too_large else 422
    shown = too_large or errors
    detail = summary(shown)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if status == 422 and any(tuple(e.get("loc", ())) == ("body",) for e in errors) and not media.endswith("json"):
        # the whole body refused, and it was not sent as JSON: the usual cause is the missing header
        detail = (f"body: send it as JSON with the header Content-Type: application/json (this request's "
                  f"Content-Type: {media or 'none'}); {detail}")
    log.info("request_rejected", status=status, detail=detail, path=request.url.path)
    return _response(status, detail, None, errors)


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail
    errors = detail if isinstance(detail, list) else None
    text = summary(errors) if errors else str(detail)
    code = None
    if errors and isinstance(errors[0], dict) and errors[0].get("type") == "idempotency_key_reused":
        code = "idempotency_key_reused"
    return _response(exc.status_code, text, code, errors, dict(exc.headers or {}))


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("request_failed", path=request.url.path, error=f"{type(exc).__name__}: {exc}"[:500])
    return _response(500, "internal error (see the API's log for this request id)")


def install(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)
