"""The MCP tools. Each tool builds the same request model the REST route takes and hands it to a
`MemoryBackend` (the API's `MemoryService`, or its REST route): no operation is implemented here.

The only logic of its own is the bounded wait of `wait=true` writes (polling the task status, as a
REST client would) and turning bad arguments and service errors into MCP tool errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Annotated, Any, Literal

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from starlette import types as asgi
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from service.api.security import caller_of
from service.auth import Caller
from service.context_format import render_markdown
from service.domain import CATEGORIES, ID_PATTERN, MAX_BATCH_MEMORIES, Message, Scope, TaskStatus
from service.errors import ServiceError
from service.mcp.backend import MemoryBackend, ServiceBackend
from service.schemas import (
    AcceptedResponse,
    BulkDeleteRequest,
    ContextResponse,
    ConversationRequest,
    DuplicatePage,
    EntityChange,
    GraphSearchRequest,
    GraphSearchResponse,
    MemoryPage,
    MergeRequest,
    RawBatchRequest,
    RawMemoryItem,
    RawMemoryRequest,
    ReviewRequest,
    SearchRequest,
    SearchResponse,
    TaskResponse,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from service.settings import Settings

log = structlog.get_logger(__name__)

SERVER_NAME = "neuralscape-memory"
# How long a write with wait=true polls its task before answering with the task id and its status.
WAIT_SECONDS = 30.0

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

CATEGORY_HELP = "; ".join(f"{c.name} ({c.default_scope}): {c.description}" for c in CATEGORIES.values())
CATEGORY_ENUM: dict[str, Any] = {"enum": list(CATEGORIES)}

UserId = Annotated[
    str,
    Field(min_length=1, max_length=128, pattern=ID_PATTERN,
          description="Whose memories: a stable id for the person, e.g. their username. Required."),
]
ProjectId = Annotated[
    str | None,
    Field(min_length=1, max_length=128, pattern=ID_PATTERN,
          description="The project (e.g. the repository name). Reads then cover global memories plus this "
                      "project's; writes of project-scoped categories need it."),
]
AgentId = Annotated[
    str | None,
    Field(min_length=1, max_length=128, pattern=ID_PATTERN, description="Which agent writes (provenance); optional."),
]
Query = Annotated[str, Field(min_length=1, max_length=2000, description="What to look for, in natural language.")]
EntityIdArg = Annotated[str, Field(min_length=1, max_length=128, description="An entity id (list_duplicate_entities).")]
Category = Annotated[
    str,
    Field(min_length=1, max_length=64, json_schema_extra=CATEGORY_ENUM,
          description=f"One of the 13 categories (name (default scope): meaning): {CATEGORY_HELP}."),
]
OptionalCategory = Annotated[
    Annotated[str, Field(min_length=1, max_length=64, json_schema_extra=CATEGORY_ENUM)] | None,
    Field(description="Only memories of this category."),
]
Categories = Annotated[
    list[Annotated[str, Field(json_schema_extra=CATEGORY_ENUM)]] | None,
    Field(max_length=13, description="Only memories of these categories (graph facts have no category)."),
]
ScopeArg = Annotated[
    Literal["global", "project"] | None,
    Field(description="global = about the person, everywhere; project = only for project_id (needs project_id). "
                      "Unset = the category's default (flexible categories: project when project_id is given)."),
]
Wait = Annotated[
    bool,
    Field(description=f"true = wait (up to {WAIT_SECONDS:.0f} s) until the write is done and return its result; "
                      "false = return the task id at once (see get_task_status)."),
]
TaskId = Annotated[
    str,
    Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="The task_id a write returned."),
]


class Fact(BaseModel):
    """One fact of remember_many."""

    content: Annotated[str, Field(min_length=1, description="One self-contained fact, e.g. 'Prefers tabs'.")]
    category: Category
    scope: ScopeArg = None


class WriteOutcome(BaseModel):
    """A queued write: its task id and, after a wait, its outcome."""

    task_id: str
    status: Literal["accepted"] | TaskStatus
    result: dict[str, Any] | None = None
    error: str | None = None
    message: str


def _scope(value: str | None) -> Scope | None:
    return Scope(value) if value else None


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


async def _settle(backend: MemoryBackend, accepted: AcceptedResponse, wait: bool) -> WriteOutcome:
    if not wait:
        return WriteOutcome(
            task_id=accepted.task_id, status="accepted",
            message="Queued. Call get_task_status with this task_id to see when it is stored.",
        )
    deadline = time.monotonic() + WAIT_SECONDS
    delay = 0.05
    while True:
        task = await backend.task_status(accepted.task_id)
        remaining = deadline - time.monotonic()
        if task.status in (TaskStatus.COMPLETED, TaskStatus.FAILED) or remaining <= 0:
            break
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 1.0)
    if task.status is TaskStatus.COMPLETED:
        message = "Done."
    elif task.status is TaskStatus.FAILED:
        message = "The write failed; see error."
    else:
        message = (f"Still {task.status.value} after {WAIT_SECONDS:.0f} s. "
                   "Call get_task_status with this task_id later.")
    return WriteOutcome(task_id=task.task_id, status=task.status, result=task.result, error=task.error,
                        message=message)


def build_server(backend_of: Callable[[], MemoryBackend]) -> MCPServer[Any]:
    """The MCP server with every tool; `backend_of` is read on each call (the API's deps exist only
    once its lifespan has started)."""
    mcp: MCPServer[Any] = MCPServer(SERVER_NAME, version="0.1.0", instructions=INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    additive = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                               open_world_hint=False)

    @mcp.tool(annotations=read_only)
    async def recall_memories(
        query: Query,
        user_id: UserId,
        project_id: ProjectId = None,
        categories: Categories = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many results.")] = 10,
        trace: Annotated[bool, Field(description="Record which memories came back and which entities were used "
                                                 "(trace_id in the answer; kept TRACE_TTL_DAYS).")] = False,
    ) -> SearchResponse:
        """Search the user's memories: by meaning (embeddings), by exact words and names (BM25), through the
        knowledge graph (memories about the entities the query names and their neighbours) and, when the query
        names a time ("last May", "in 2023"), by when it happened; one fused ranking, each result's `signals`
        saying which of these found it. With project_id: global memories plus that project's; without: global
        memories only. Use it before answering anything about the user, their preferences or projects."""
        with _tool_errors():
            req = SearchRequest(query=query, user_id=user_id, project_id=project_id, categories=categories,
                                limit=limit, trace=trace)
            return await backend_of().search(req)

    @mcp.tool(annotations=additive)
    async def remember(
        content: Annotated[str, Field(description="One self-contained fact, e.g. 'Prefers tabs over spaces'.")],
        user_id: UserId,
        category: Category,
        project_id: ProjectId = None,
        scope: ScopeArg = None,
        agent_id: AgentId = None,
        wait: Wait = False,
    ) -> WriteOutcome:
        """Store one fact you already categorised (no extraction). Project categories (tech_stack, convention,
        architecture, dependency) and scope=project need project_id. Returns the task id; with wait=true the
        stored memory (result.memories), or after the bounded wait the task id with its current status."""
        with _tool_errors():
            req = RawMemoryRequest(content=content, user_id=user_id, category=category, scope=_scope(scope),
                                   project_id=project_id, agent_id=agent_id)
            backend = backend_of()
            return await _settle(backend, await backend.submit_raw(req), wait)

    @mcp.tool(annotations=additive)
    async def remember_many(
        facts: Annotated[list[Fact], Field(
            min_length=1, max_length=MAX_BATCH_MEMORIES,
            description=f"1-{MAX_BATCH_MEMORIES} facts: {{content, category, scope?}}.")],
        user_id: UserId,
        project_id: ProjectId = None,
        agent_id: AgentId = None,
        wait: Wait = False,
    ) -> WriteOutcome:
        """Store several facts you already categorised as one write (one task, one embedding batch: cheaper than
        one remember per fact). Each is checked as remember checks one; an error names it (memories[i]); a fact
        repeating an earlier one of the list is stored once. Returns the task id; with wait=true the stored
        memories in order (result.memories)."""
        with _tool_errors():
            req = RawBatchRequest(user_id=user_id, memories=[
                RawMemoryItem(content=f.content, category=f.category, scope=_scope(f.scope), project_id=project_id,
                              agent_id=agent_id) for f in facts])
            backend = backend_of()
            return await _settle(backend, await backend.submit_raw_batch(req), wait)

    @mcp.tool(annotations=additive)
    async def remember_conversation(
        messages: Annotated[
            list[Message],
            Field(min_length=1, max_length=500,
                  description="The exchange, oldest first: {role: user|assistant|system|tool, content, id?, "
                              "timestamp?}. Facts are extracted from the user's turns; every other message "
                              "with content is kept as an 'interaction' memory of its window. id (1-128 "
                              "chars) names the message in each memory's source_message_ids (else its "
                              "0-based index); timestamp (ISO 8601 or a plain English date; one that does "
                              "not parse is ignored) becomes the memory's occurred_at."),
        ],
        user_id: UserId,
        project_id: ProjectId = None,
        agent_id: AgentId = None,
        wait: Wait = False,
    ) -> WriteOutcome:
        """Extract categorised facts from a conversation and store them (the extraction path: Gemini when
        configured, else rule-based); messages no fact came from are stored as 'interaction' memories
        ("<role>: <text>" lines), so nothing said is lost. Every memory lists its source_message_ids.
        Returns the task id; with wait=true the stored memories."""
        with _tool_errors():
            req = ConversationRequest(messages=messages, user_id=user_id, project_id=project_id, agent_id=agent_id)
            backend = backend_of()
            return await _settle(backend, await backend.submit_conversation(req), wait)

    @mcp.tool(annotations=read_only)
    async def get_project_context(
        user_id: UserId,
        project_id: ProjectId = None,
        max_chars: Annotated[int, Field(ge=200, le=200_000, description="Bound of the markdown text.")] = 4000,
    ) -> Annotated[CallToolResult, ContextResponse]:
        """Everything known for a session: the user's global memories plus the project's (with project_id),
        grouped by category. The text is a compact markdown block for your context; the structured
        content has every memory with its id."""
        with _tool_errors():
            ctx = await backend_of().context(user_id, project_id)
        return CallToolResult(
            content=[TextContent(type="text", text=render_markdown(ctx, max_chars))],
            structured_content=ctx.model_dump(mode="json"),
        )

    @mcp.tool(annotations=read_only)
    async def search_knowledge_graph(
        query: Query,
        user_id: UserId,
        project_id: ProjectId = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many facts.")] = 10,
        include_history: Annotated[
            bool, Field(description="Also facts that are no longer true (superseded or deleted).")
        ] = False,
    ) -> GraphSearchResponse:
        """Facts from the temporal knowledge graph (subject, predicate, object, since when, until when), e.g.
        'user works_at Acme Corp' or 'shop uses PostgreSQL'. With project_id: global facts plus that
        project's; without: all of the user's."""
        with _tool_errors():
            req = GraphSearchRequest(query=query, user_id=user_id, project_id=project_id, limit=limit,
                                     include_history=include_history)
            return await backend_of().graph_search(req)

    @mcp.tool(annotations=read_only)
    async def list_duplicate_entities(
        user_id: UserId,
        project_id: ProjectId = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Page size.")] = 20,
        cursor: Annotated[str | None, Field(max_length=200, description="next_cursor of the previous page.")] = None,
    ) -> DuplicatePage:
        """Entity pairs that may be one thing ("Mel" / "Melanie", "Postgres" / "PostgreSQL") which the resolution
        gate left for review, highest score first, each with both entities (name, type, aliases, how many
        memories mention it) and the gate's reason. Decide with review_duplicate."""
        with _tool_errors():
            return await backend_of().list_duplicates(user_id, project_id, limit, cursor)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                          open_world_hint=False))
    async def review_duplicate(
        user_id: UserId,
        source_id: EntityIdArg,
        target_id: EntityIdArg,
        confirm: Annotated[bool, Field(description="true: they are one entity (source merges into target); "
                                                   "false: they differ (never proposed again).")],
    ) -> EntityChange:
        """Decide a pair from list_duplicate_entities. Only confirm when the memories make it clear that both
        names denote the same thing; a merge can be undone, but ask the user when unsure."""
        with _tool_errors():
            req = ReviewRequest(user_id=user_id, source_id=source_id, target_id=target_id, confirm=confirm,
                                reviewer="mcp")
            return await backend_of().review_duplicate(req)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                          open_world_hint=False))
    async def merge_entities(user_id: UserId, source_id: EntityIdArg, target_id: EntityIdArg) -> EntityChange:
        """Merge two entities of the user's graph the user said are one (same group and compatible types only):
        the source's name becomes an alias of the target and the target gains its mentions and facts.
        Reversible with POST /v1/graph/entities/{source_id}/unmerge."""
        with _tool_errors():
            return await backend_of().merge_entities(MergeRequest(user_id=user_id, source_id=source_id,
                                                                  target_id=target_id))

    @mcp.tool(annotations=read_only)
    async def list_memories(
        user_id: UserId,
        scope: Annotated[Literal["global", "project"] | None, Field(description="Only this scope.")] = None,
        category: OptionalCategory = None,
        project_id: ProjectId = None,
        agent_id: AgentId = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Page size.")] = 50,
        cursor: Annotated[
            str | None, Field(max_length=64, description="next_cursor of the previous page.")
        ] = None,
    ) -> MemoryPage:
        """A page of the user's stored memories (with ids, for delete_memories), ordered by id. Without scope and
        project_id: all of them; with project_id: global plus that project's. Pass next_cursor back as cursor."""
        with _tool_errors():
            return await backend_of().list_memories(
                user_id, scope=scope, category=category, project_id=project_id, agent_id=agent_id, limit=limit,
                cursor=cursor,
            )

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                          open_world_hint=False))
    async def delete_memories(
        user_id: UserId,
        memory_ids: Annotated[
            list[str] | None, Field(min_length=1, max_length=1000, description="Delete exactly these memories.")
        ] = None,
        scope: Annotated[Literal["global", "project"] | None, Field(description="Filter: this scope.")] = None,
        category: OptionalCategory = None,
        project_id: ProjectId = None,
        agent_id: AgentId = None,
        all: Annotated[
            bool, Field(description="true (with no ids and no filter) deletes every memory of the user.")
        ] = False,
        wait: Wait = False,
    ) -> WriteOutcome:
        """Delete memories by id (memory_ids) or by filter (scope, category, project_id, agent_id), never both.
        Deletes are queued like writes: with wait=true the result lists the deleted ids. Graph facts that only
        these memories supported are expired (kept as history)."""
        with _tool_errors():
            req = BulkDeleteRequest(user_id=user_id, memory_ids=memory_ids, scope=_scope(scope), category=category,
                                    project_id=project_id, agent_id=agent_id, all=all)
            backend = backend_of()
            return await _settle(backend, await backend.submit_bulk_delete(req), wait)

    @mcp.tool(annotations=read_only)
    async def get_task_status(task_id: TaskId) -> TaskResponse:
        """Status of a queued write or delete: queued, processing, completed (with result) or failed (with
        error)."""
        with _tool_errors():
            return await backend_of().task_status(task_id)

    return mcp


def mount_http(app: FastAPI, settings: Settings) -> Callable[[], AbstractAsyncContextManager[None]]:
    """Serve the tools over streamable HTTP at /mcp/ on the API's own `MemoryService`.

    Returns the session manager's `run`, which the API lifespan enters (a mounted app's own lifespan
    never runs). Stateless with JSON responses: no session state to lose on a restart, no open streams.
    """

    def backend() -> MemoryBackend:
        return ServiceBackend(app.state.deps.service, app.state.deps.intake, current_caller.get())

    server = build_server(backend)
    # host: DNS-rebinding protection (Host/Origin must be localhost) when the API binds to localhost.
    http_app = server.streamable_http_app(
        streamable_http_path="/", stateless_http=True, json_response=True, host=settings.host
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
