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
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_body
from service.core.auth import ApiKeyStore, Caller
from service.core.errors import DependencyUnavailable, RateLimited, SchemaError, Unauthorized
from service.core.kv import redis_guard
from service.core.sensitivity import Sensitivity, set_current
from service.deps import Deps

log = structlog.get_logger(__name__)

PUBLIC_PATHS = frozenset({"/health", "/metrics", "/v1/categories", "/docs", "/docs/oauth2-redirect", "/openapi.json",
                          "/redoc"})  # /metrics checks its own credentials (an admin key or METRICS_TOKEN)
WRITE_METHODS = frozenset({"PUT", "DELETE", "PATCH"})
# POST routes that are reads (everything else posted is a write)
READ_POSTS = frozenset({"/v1/search", "/v1/graph/search", "/v1/graph/query"})
# The web console's pages sign in with their session cookie instead (service/ui/session.py `console`, which
# verifies the key, rate-limits and checks CSRF); its static files are a mount, outside every dependency.
CONSOLE_PREFIX = "/ui/"


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
        return Caller(default_user=deps.settings.service.default_user_id or None)
    record = await ApiKeyStore(deps.redis, deps.settings.redis).verify(token)
    return Caller(key_id=record.key_id, key_user=record.user_id, admin=record.admin,
                  max_sensitivity=record.max_sensitivity)


async def get_caller(request: Request) -> Caller:
    cached = getattr(request.state, "caller", None)
    if isinstance(cached, Caller):
        set_current(cached.ceiling(_ceiling_param(request)))
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
    # Every read this request makes inherits the key's ceiling, lowered by a `max_sensitivity` query parameter
    # (a body field lowers it again where the route reads its body: service/core/sensitivity.py `lowered`).
    set_current(caller.ceiling(_ceiling_param(request)))
    return caller


def _ceiling_param(request: Request) -> str | None:
    value = request.query_params.get("max_sensitivity")
    if value is None:
        return None
    try:
        return Sensitivity(value).value
    except ValueError as exc:
        raise SchemaError(f"max_sensitivity must be one of {', '.join(t.value for t in Sensitivity)}",
                          ("query", "max_sensitivity"), "enum") from exc


CallerDep = Annotated[Caller, Depends(get_caller)]


def is_write(method: str, path: str) -> bool:
    return method in WRITE_METHODS or (method == "POST" and path not in READ_POSTS)


async def rate_limit(deps: Deps, request: Request, caller: Caller) -> None:
    """A fixed one-minute window per key (or client address) and kind, counted in Redis (RateLimiter)."""
    kind = "writes" if is_write(request.method, request.url.path) else "reads"
    limit = (deps.settings.access.rate_limit_writes_per_minute if kind == "writes"
             else deps.settings.access.rate_limit_reads_per_minute)
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
        key = f"{deps.settings.redis.queue_name}:rate:{kind}:{who}:{window}"
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
            reserved = await redis_guard(deps.settings.redis, "rate limit", reserve())
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


# How much of a body over its limit is read and thrown away before the 413 (at most): a client still sending
# when the server closes gets a connection reset instead of the answer (Python's urllib did, 1 time in 6 at 3 MiB).
# Bodies larger than this are answered at once and the connection is closed (as nginx's lingering close does).
DISCARD_BYTES = 32 * 1024 * 1024


class BodyLimit:
    """413 for a body over `limit` bytes, before the app reads it: by Content-Length when it is sent, else
    while the body streams in. Before answering, the rest of the body is read and discarded (up to
    DISCARD_BYTES), so the client, still writing, reads the 413 instead of a reset connection."""

    def __init__(self, app: ASGIApp, limit: int, paths: dict[str, int] | None = None,
                 discard: int = DISCARD_BYTES) -> None:
        self.app = app
        self.default = limit
        self.paths = paths or {}  # path -> its own limit (MAX_IMPORT_BYTES for /v1/import)
        self.discard = discard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.paths.get(scope.get("path", ""), self.default)
        setting = "MAX_IMPORT_BYTES" if limit != self.default else "MAX_BODY_BYTES"
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            if length.isdigit() and int(length) <= self.discard:
                await self._drain(receive, 0)
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
                        if message.get("more_body", False):
                            await self._drain(receive, seen)
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

    async def _drain(self, receive: Receive, seen: int) -> None:
        """Read and discard the body up to DISCARD_BYTES in all (the client stops writing, or the bound is hit)."""
        while seen <= self.discard:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    @staticmethod
    async def _reject(send: Send, limit: int, setting: str) -> None:
        body = error_body(413, f"request body over {setting} ({limit} bytes)")
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class HostCheck:
    """The Host header check (Starlette's TrustedHostMiddleware, no www redirect), answering its 400 with the
    one error body instead of plain text."""

    def __init__(self, app: ASGIApp, allowed_hosts: list[str]) -> None:
        self.app = app
        self.check = TrustedHostMiddleware(self._through, allowed_hosts=allowed_hosts, www_redirect=False)

    async def _through(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["host_checked"] = True
        await self.app(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = error_body(400, "invalid Host header: not one of ALLOWED_HOSTS", "invalid_host")

        async def as_json(message: Message) -> None:
            if scope.get("host_checked"):
                await send(message)
            elif message["type"] == "http.response.start":
                await send({"type": "http.response.start", "status": 400, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            elif message["type"] == "http.response.body":
                await send({"type": "http.response.body", "body": body})
            else:
                await send(message)

        await self.check(scope, receive, as_json)
