"""The MCP server: the tools of service/mcp/tools.py registered on an `MCPServer`, each a call to a
`MemoryBackend` (the API's own objects, or its REST routes); bad arguments and service errors come back as tool
errors the agent can read. `mount_http` serves it on the API itself, behind the API keys.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, get_type_hints

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError
from pydantic_core import PydanticUndefined
from starlette import types as asgi
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from service.core.auth import Caller, caller_of
from service.core.errors import ServiceError
from service.mcp.backend import ServiceBackend
from service.mcp.operations import MemoryBackend
from service.mcp.tools import TOOLS, Tool

if TYPE_CHECKING:
    from fastapi import FastAPI

    from service.core.settings import ServiceSettings

log = structlog.get_logger(__name__)

SERVER_NAME = "memory-platform"

INSTRUCTIONS = """\
Long-term memory for the user and their projects.
- At the start of a session, call get_project_context (with the project_id of the current repository,
  if any) to load what is already known.
- Before answering questions about the user's preferences, setup or past decisions, call recall_memories.
- When you learn a durable fact (a preference, a convention, a decision and its reason), call remember
  with the best category (several at once: remember_many); or pass a whole exchange to
  remember_conversation to have facts extracted (what yields no fact is kept as interaction memories).
- Writes are queued: they return a task id (get_task_status), or the stored memory with wait=true.
Always pass the same user_id (and project_id for project work)."""


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "invalid arguments: " + "; ".join(parts)


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """Bad arguments and refusals of the service come back as tool errors the agent can read."""
    try:
        yield
    except ValidationError as exc:
        raise ToolError(_explain(exc)) from exc
    except ServiceError as exc:
        raise ToolError(str(exc)) from exc


def _signature(tool: Tool) -> inspect.Signature:
    """The tool's parameters as its arguments model declares them (types, constraints, descriptions, defaults):
    what the MCP server builds the input schema from."""
    hints = get_type_hints(tool.args, include_extras=True)
    params = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[name],
                          default=inspect.Parameter.empty if field.default is PydanticUndefined else field.default)
        for name, field in tool.args.model_fields.items()
    ]
    return inspect.Signature(params, return_annotation=tool.returns)


def _function(tool: Tool, backend_of: Callable[[], MemoryBackend]) -> Callable[..., Any]:
    async def call(**arguments: Any) -> Any:
        with _tool_errors():
            return await tool.run(backend_of(), tool.args.model_validate(arguments))

    call.__name__ = call.__qualname__ = tool.name
    call.__doc__ = tool.args.__doc__
    call.__signature__ = _signature(tool)  # type: ignore[attr-defined]
    return call


def build_server(backend_of: Callable[[], MemoryBackend]) -> MCPServer[Any]:
    """The MCP server with every tool; `backend_of` is read on each call (the API's deps exist only
    once its lifespan has started)."""
    mcp: MCPServer[Any] = MCPServer(SERVER_NAME, version="0.1.0", instructions=INSTRUCTIONS)
    for tool in TOOLS:
        mcp.add_tool(_function(tool, backend_of), name=tool.name, description=tool.args.__doc__,
                     annotations=tool.hints)
    return mcp


def mount_http(app: FastAPI, service: ServiceSettings) -> Callable[[], AbstractAsyncContextManager[None]]:
    """Serve the tools over streamable HTTP at /mcp/ on the API's own service objects.

    Returns the session manager's `run`, which the API lifespan enters (a mounted app's own lifespan
    never runs). Stateless with JSON responses: no session state to lose on a restart, no open streams.
    """

    def backend() -> MemoryBackend:
        deps = app.state.deps
        return ServiceBackend(deps, current_caller.get())

    server = build_server(backend)
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
