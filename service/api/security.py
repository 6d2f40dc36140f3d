"""Who is calling, and how much, on HTTP: the API-key dependency and the rate limit (their rules: service/core/auth.py
`caller_of`, `rate_limit`), the body-size limit, the Host check.

Every route except PUBLIC_PATHS depends on `get_caller` (installed once on the app), so a route added
later is guarded without doing anything. Limits are answered before any work: the body limit in an ASGI
middleware before the body is read, the rate limit before the route runs.
"""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import Depends, Request
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_body
from service.core.auth import Caller, Clients, api_key_of, caller_of, rate_limit
from service.core.errors import SchemaError, Unauthorized
from service.core.sensitivity import Sensitivity, set_current

log = structlog.get_logger(__name__)

# /metrics checks its own credentials (an admin key or METRICS_TOKEN)
PUBLIC_PATHS = frozenset({"/health", "/metrics", "/v1/categories", "/docs", "/docs/oauth2-redirect", "/openapi.json",
                          "/redoc", "/favicon.ico"})
# The web console's pages sign in with their session cookie instead (service/ui/session.py `console`, which
# verifies the key, rate-limits and checks CSRF); its static files are a mount, outside every dependency.
CONSOLE_PREFIX = "/ui/"


async def get_caller(request: Request) -> Caller:
    cached = getattr(request.state, "caller", None)
    if isinstance(cached, Caller):
        set_current(cached.ceiling(_ceiling_param(request)))
        return cached
    deps: Clients = request.app.state.deps  # service/deps.py `Deps`
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
        await rate_limit(deps, request.app.state.rate_limiter, caller, request.method, request.url.path,
                         request.client.host if request.client else None)
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
