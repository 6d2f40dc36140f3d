"""The MCP server on the API itself (MCP_TRANSPORT=http): streamable HTTP at /mcp/, behind the API keys, its tools
calling the API's own service objects."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from starlette import types as asgi
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from service.core.auth import Caller, caller_of
from service.core.errors import ServiceError
from service.mcp.backend import ServiceBackend
from service.mcp.operations import MemoryBackend
from service.mcp.server import build_server

if TYPE_CHECKING:
    from fastapi import FastAPI

    from service.core.settings import ServiceSettings


def mount_http(app: FastAPI, service: ServiceSettings, toolsets: Iterable[str] = ()
               ) -> Callable[[], AbstractAsyncContextManager[None]]:
    """Serve the tools over streamable HTTP at /mcp/ on the API's own service objects.

    Returns the session manager's `run`, which the API lifespan enters (a mounted app's own lifespan
    never runs). Stateless with JSON responses: no session state to lose on a restart, no open streams.
    """

    def backend() -> MemoryBackend:
        deps = app.state.deps
        return ServiceBackend(deps, current_caller.get())

    server = build_server(backend, toolsets)
    # host: DNS-rebinding protection (Host/Origin must be localhost) when the API binds to localhost.
    http_app = server.streamable_http_app(
        streamable_http_path="/", stateless_http=True, json_response=True, host=service.host
    )
    app.mount("/mcp", McpAuth(http_app, app))
    return server.session_manager.run


ANONYMOUS = Caller()
current_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar("mcp_caller", default=ANONYMOUS)


class McpAuth:
    """The API keys guard the MCP transport too: 401 without a valid key under AUTH_MODE=keys; the
    caller is handed to the tools (ServiceBackend) through a context variable of the request."""

    def __init__(self, inner: asgi.ASGIApp, api: FastAPI) -> None:
        self.inner = inner
        self.api = api

    async def __call__(self, scope: asgi.Scope, receive: asgi.Receive, send: asgi.Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        try:
            caller = await caller_of(self.api.state.deps, Headers(scope=scope))
        except ServiceError as exc:
            response = JSONResponse({"detail": str(exc)}, status_code=exc.status_code,
                                    headers={"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None)
            await response(scope, receive, send)
            return
        token = current_caller.set(caller)
        try:
            await self.inner(scope, receive, send)
        finally:
            current_caller.reset(token)
