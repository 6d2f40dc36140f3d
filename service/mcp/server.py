"""The MCP server: the tools of service/mcp/tools.py registered on an `MCPServer`, each a call to a
`MemoryBackend` (the API's own objects, or its REST routes); bad arguments and service errors come back as tool
errors the agent can read. service/mcp/http.py serves it on the API itself, behind the API keys (apart, so the stdio
server starts without the API's auth and Redis imports).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import Tool as ListedTool
from pydantic import ValidationError

from service.core.errors import ServiceError, validation_message
from service.mcp.operations import MemoryBackend
from service.mcp.tools import Tool, tools_for

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
        message = validation_message(dict(err))
        parts.append(f"{loc}: {message}" if loc else message)
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
    """Every parameter optional and untyped for the MCP server's own check: the tool's arguments model checks them
    (`_function`), so a bad argument's error says its rule in words (service/core/errors.py), and the listed input
    schema is the model's own (`CompactServer`)."""
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Any, default=None)
              for name in tool.args.model_fields]
    return inspect.Signature(params, return_annotation=tool.returns)


def _function(tool: Tool, backend_of: Callable[[], MemoryBackend]) -> Callable[..., Any]:
    async def call(**arguments: Any) -> Any:
        given = {k: v for k, v in arguments.items() if v is not None}  # unset (or null): the model's default
        with _tool_errors():
            return await tool.run(backend_of(), tool.args.model_validate(given))

    call.__name__ = call.__qualname__ = tool.name
    call.__doc__ = describe(tool)
    call.__signature__ = _signature(tool)  # type: ignore[attr-defined]
    return call


def compact_schema(node: Any) -> Any:
    """An input schema as an agent reads it, without repetition: no titles (the property names say them), an
    optional field as its own type (not `anyOf [T, null]` with `default: null`: it is simply not required), and
    an id's pattern and lengths left to the server's check, whose error says the rule in words."""
    if isinstance(node, list):
        return [compact_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: compact_schema(v) for k, v in node.items() if k != "title"}
    any_of = out.get("anyOf")
    if (isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of and "default" in out
            and out["default"] is None):
        out.pop("anyOf")
        out.pop("default")
        out = {**next(x for x in any_of if x != {"type": "null"}), **out}
    if ("pattern" in out or "enum" in out) and out.get("type") == "string":
        for key in ("pattern", "minLength", "maxLength"):
            out.pop(key, None)
    return out


def describe(tool: Tool) -> str:
    """The tool's description: its arguments model's docstring on one line."""
    return " ".join((tool.args.__doc__ or "").split())


class CompactServer(MCPServer[Any]):
    """`tools/list` without output schemas (optional in MCP; a tool's answer still carries its structured content
    and the same JSON as text) and with each tool's arguments model as its compact input schema: an agent pays for
    this list in every conversation (docs/agents.md "Toolsets")."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        super().__init__(SERVER_NAME, version="0.1.0", instructions=INSTRUCTIONS)
        # the model's docstring is the tool's description: not again inside its schema
        self.schemas = {t.name: compact_schema({k: v for k, v in t.args.model_json_schema().items()
                                                if k != "description"}) for t in tools}

    async def list_tools(self) -> list[ListedTool]:
        return [t.model_copy(update={"input_schema": self.schemas[t.name], "output_schema": None})
                for t in await super().list_tools()]


def build_server(backend_of: Callable[[], MemoryBackend], toolsets: Iterable[str] = ()) -> MCPServer[Any]:
    """The MCP server with the core tools and those of `toolsets` (MCP_TOOLSETS); `backend_of` is read on each
    call (the API's deps exist only once its lifespan has started)."""
    tools = tools_for(toolsets)
    mcp = CompactServer(tools)
    for tool in tools:
        mcp.add_tool(_function(tool, backend_of), name=tool.name, description=describe(tool),
                     annotations=tool.hints)
    return mcp
