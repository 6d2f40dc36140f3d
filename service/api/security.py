"""Who is calling, and how much: the API-key dependency, per-key rate limits, the body-size limit.

Every route except PUBLIC_PATHS depends on `get_caller` (installed once on the app), so a route added
later is guarded without doing anything. Limits are answered before any work: the body limit in an ASGI
middleware before the body is read, the rate limit before the route runs.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import structlog
from fastapi import Depends, Request
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.auth import ApiKeyStore, Caller
from service.deps import Deps
from service.errors import DependencyUnavailable, RateLimited, Unauthorized
from service.kv import redis_guard

log = structlog.get_logger(__name__)

PUBLIC_PATHS = frozenset({"/health", "/metrics", "/v1/categories", "/docs", "/docs/oauth2-redirect", "/openapi.json",
                          "/redoc"})  # /metrics checks its own credentials (an admin key or METRICS_TOKEN)
WRITE_METHODS = frozenset({"PUT", "DELETE", "PATCH"})
# POST routes that are reads (everything else posted is a write)
READ_POSTS = frozenset({"/v1/search", "/v1/graph/search"})
# The web console's pages sign in with their session cookie instead (service/ui/session.py `console`, which
# verifies the key, rate-limits and checks CSRF); its static files are a mount, outside every dependency.
CONSOLE_PREFIX = "/ui/"


class ErrorBody(BaseModel):
    detail: Any


# Documented on every route (the OpenAPI names each 4xx a client can get).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "A domain rule is broken (the detail names it and the valid values)"},
    401: {"model": ErrorBody, "description": "No API key, or a malformed, unknown or revoked one"},
    403: {"model": ErrorBody, "description": "The key may not do this (another user_id, maintenance without admin)"},
    404: {"model": ErrorBody, "description": "Unknown id (ids of other tenants are unknown too)"},
    413: {"model": ErrorBody, "description": "Body over MAX_BODY_BYTES, or content over its limit"},
    429: {"model": ErrorBody, "description": "Rate limit reached; see Retry-After"},
    503: {"model": ErrorBody, "description": "A dependency (Redis, a store) is unavailable"},
}


def api_key_of(headers: Any) -> str | None:
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return str(token.strip())
    key = headers.get("x-api-key")
    return str(key).strip() if key else None


async def caller_of(deps: Deps, headers: Any) -> Caller:
    """The caller these headers authenticate. A key that is sent is always verified."""
    token = api_key_of(headers)
    if token is None:
        if deps.settings.resolved_auth_mode == "keys":
            raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
        return Caller()
    record = await ApiKeyStore(deps.redis, deps.settings).verify(token)
    return Caller(key_id=record.key_id, key_user=record.user_id, admin=record.admin)


async def get_caller(request: Request) -> Caller:
    cached = getattr(request.state, "caller", None)
    if isinstance(cached, Caller):
        return cached
    deps: Deps = request.app.state.deps
    if request.url.path.startswith(CONSOLE_PREFIX) or request.url.path == CONSOLE_PREFIX.rstrip("/"):
        return Caller()  # not kept: the console's own dependency sets the request's caller
    if request.url.path in PUBLIC_PATHS:
        caller = Caller()
        if api_key_of(request.headers):
            try:  # a public route answers anyway; a valid admin key sees more (/health's errors)
                caller = await caller_of(deps, request.headers)
            except Unauthorized:
                caller = Caller()
    else:
        caller = await caller_of(deps, request.headers)
        await rate_limit(deps, request, caller)
    request.state.caller = caller
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]


def is_write(method: str, path: str) -> bool:
    return method in WRITE_METHODS or (method == "POST" and path not in READ_POSTS)


async def rate_limit(deps: Deps, request: Request, caller: Caller) -> None:
    """A fixed one-minute window per key (or client address) and kind, counted in Redis (RateLimiter)."""
    kind = "writes" if is_write(request.method, request.url.path) else "reads"
    limit = (deps.settings.rate_limit_writes_per_minute if kind == "writes"
             else deps.settings.rate_limit_reads_per_minute)
    if limit <= 0:
        return
    who = caller.bucket if caller.key_id else f"ip:{request.client.host if request.client else 'unknown'}"
    limiter: RateLimiter = request.app.state.rate_limiter
    await limiter.check(deps, kind, who, limit)


class RateLimiter:
    """Fixed one-minute windows in Redis, counted in chunks. A process reserves `chunk_for(limit)` requests of a
    window at once (one INCRBY) and spends them locally, so a busy client costs one Redis round trip per chunk
    instead of one per request (round trips are a large share of the accepting loop's time, docs/benchmarks.md). The
    window's counter in Redis is what every process has reserved: a limit is never exceeded, and it is reached
    early by at most what the processes reserved and did not spend (under 1% of the limit per process; limits
    under 200 a minute are counted one by one)."""

    def __init__(self) -> None:
        self._left: dict[str, int] = {}  # window key -> requests reserved in Redis and not spent yet
        self._window = -1

    @staticmethod
    def chunk_for(limit: int) -> int:
        return max(1, min(32, limit // 200))

    async def check(self, deps: Deps, kind: str, who: str, limit: int) -> None:
        now = time.time()
        window = int(now // 60)
        if window != self._window:  # what was reserved for a past window is of no use
            self._left.clear()
            self._window = window
        key = f"{deps.settings.arq_queue_name}:rate:{kind}:{who}:{window}"
        if self._left.get(key, 0) > 0:
            self._left[key] -= 1
            return
        chunk = self.chunk_for(limit)

        async def reserve() -> int:
            pipe = deps.redis.pipeline(transaction=True)
            pipe.incrby(key, chunk)
            pipe.expire(key, 120)
            n, _ = await pipe.execute()
            return int(n)

        try:
            reserved = await redis_guard(deps.settings, "rate limit", reserve())
        except DependencyUnavailable as exc:  # fail open: reads need no Redis, and a write answers 503 itself
            log.warning("rate_limit_unavailable", error=str(exc)[:200])
            return
        granted = max(0, min(chunk, limit - (reserved - chunk)))  # of the units reserved-chunk+1 .. reserved
        if granted == 0:
            retry_after = max(1, int((window + 1) * 60 - now) + 1)
            raise RateLimited(f"rate limit of {limit} {kind} per minute reached "
                              f"(RATE_LIMIT_{kind.upper()}_PER_MINUTE); retry after {retry_after} s", retry_after)
        if window == self._window:
            self._left[key] = self._left.get(key, 0) + granted - 1  # this request spends one


class BodyLimit:
    """413 for a body over `limit` bytes, before it is read: by Content-Length when it is sent, else
    while the body streams in (the request is cut off at the limit)."""

    def __init__(self, app: ASGIApp, limit: int, paths: dict[str, int] | None = None) -> None:
        self.app = app
        self.default = limit
        self.paths = paths or {}  # path -> its own limit (MAX_IMPORT_BYTES for /v1/import)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.paths.get(scope.get("path", ""), self.default)
        setting = "MAX_IMPORT_BYTES" if limit != self.default else "MAX_BODY_BYTES"
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await self._reject(send, limit, setting)
            return
        seen = 0
        rejected = False
        started = False

        async def limited() -> Message:
            nonlocal seen, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    rejected = True
                    if not started:
                        await self._reject(send, limit, setting)
                    return {"type": "http.disconnect"}  # the app stops reading; its answer is dropped
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if rejected:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, guarded_send)
        except Exception:
            if not rejected:
                raise  # the app's own error; after a rejection it is only the cut-off body

    @staticmethod
    async def _reject(send: Send, limit: int, setting: str) -> None:
        body = f'{{"detail":"request body over {setting} ({limit} bytes)"}}'.encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

