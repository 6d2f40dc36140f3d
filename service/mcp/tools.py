"""The MCP tools, one entry each in `TOOLS`: the tool's arguments (a model whose fields and docstring are the
tool's input schema and description), the backend operation it asks for (service/mcp/operations.py) and how its
arguments become that operation's request. server.py registers them; no operation is implemented here.

The only logic of their own: the bounded wait of `wait=true` writes (polling the task status, as a REST client
would) and the markdown text of the project context.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, TypeVar

from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from service.core.domain import ListOrder, Scope, TaskStatus
from service.mcp.args import (
    DEFAULT_CONTEXT_CHARS,
    WAIT_SECONDS,
    ContextArgs,
    ConversationArgs,
    DeleteArgs,
    ListArgs,
    RecallArgs,
    RememberArgs,
    RememberManyArgs,
    TaskArgs,
    UpdateArgs,
)
from service.mcp.graph_args import (
    AddEntityArgs,
    AddFactArgs,
    AddRelationshipArgs,
    DuplicatesArgs,
    FactsAboutArgs,
    GraphSearchArgs,
    MergeArgs,
    QueryGraphArgs,
    ReviewArgs,
)
from service.mcp.operations import (
    ADD_ENTITY,
    ADD_FACT,
    ADD_RELATION,
    COMPLETE_RUN,
    CONTEXT,
    FACTS_ABOUT,
    GRAPH_SEARCH,
    LIST_DUPLICATES,
    LIST_MEMORIES,
    MERGE_ENTITIES,
    QUERY_GRAPH,
    RECORD_STEP,
    REVIEW_DUPLICATE,
    SEARCH,
    SEARCH_RUNS,
    START_RUN,
    SUBMIT_BULK_DELETE,
    SUBMIT_CONVERSATION,
    SUBMIT_RAW,
    SUBMIT_RAW_BATCH,
    SUBMIT_UPDATE,
    TASK_STATUS,
    ContextQuery,
    DuplicateQuery,
    FactsQuery,
    MemoryBackend,
    MemoryListQuery,
    Operation,
    RunCompleteQuery,
    RunStepQuery,
    TaskQuery,
    UpdateQuery,
)
from service.mcp.run_args import FinishTaskArgs, RecallTasksArgs, RecordStepArgs, StartedTask, StartTaskArgs
from service.runs.schemas import (
    RunRequest,
    RunSearchRequest,
)
from service.schemas.curation import MergeRequest, ReviewRequest
from service.schemas.graph_api import EntityWrite, FactWrite, GraphQuery, RelationWrite
from service.schemas.memories import (
    AcceptedResponse,
    BulkDeleteRequest,
    ContextResponse,
    ConversationRequest,
    RawBatchRequest,
    RawMemoryItem,
    RawMemoryRequest,
)
from service.schemas.search import GraphSearchRequest, SearchRequest, SearchResponse, SearchResult
from service.search.context_format import days, render_markdown


class WriteOutcome(BaseModel):
    """A queued write: its task id and, after a wait, its outcome."""

    task_id: str
    status: Literal["accepted"] | TaskStatus
    result: dict[str, Any] | None = None
    error: str | None = None
    message: str


class RecalledMemory(BaseModel):
    """One memory recall_memories found. Compact by default; with detail="full" every field of the search API's
    result is here too (score, signals, scope, project_id, metadata, ...)."""

    model_config = ConfigDict(extra="allow")

    id: str
    content: str
    category: str | None = None
    date: str | None = Field(default=None, description="When it happened (YYYY-MM-DD), else when it was stored.")
    source: Literal["vector", "graph"] | None = Field(default=None, description=(
        "graph: found through the knowledge graph only; the compact answer leaves out `vector` (by meaning, words "
        "or time)."))
    also: list[dict[str, Any]] | None = Field(default=None, description=(
        "Memories folded into this one ({id, kind}): their content is said here."))


class RecallAnswer(BaseModel):
    """What recall_memories answers: the memories, best first."""

    model_config = ConfigDict(extra="allow")

    results: list[RecalledMemory]
    trace_id: str | None = Field(default=None, description="With trace=true: the recorded trace's id.")


def _dates(result: SearchResult) -> dict[str, str | None]:
    """`date`: the day it was said (a graph fact: the day it became true); `event_date`: the day of the event it is
    about, when another (context_format.days, the rule the context's lines follow)."""
    said, event = days(result.occurred_at or result.valid_at, result.created_at, result.metadata)
    return {"date": said, "event_date": event} if event else {"date": said}


def recall_answer(found: SearchResponse, detail: str) -> dict[str, Any]:
    """The search's answer as recall_memories gives it, without the results below the relevance floor (an empty list
    is an answer): compact by default (only what an agent reads to answer: content, id, category, date, `source`
    only when it is the graph), everything with detail="full"."""
    related = [r for r in found.results if not r.below_floor]
    if detail == "full":
        full = found.model_copy(update={"results": related}).model_dump(mode="json")
        for item, result in zip(full["results"], related, strict=True):
            item.update(_dates(result))
        return full
    rows: list[dict[str, Any]] = []
    for r in related:
        row: dict[str, Any] = {"id": r.id, "content": r.content, "category": r.category, **_dates(r)}
        if r.source == "graph":
            row["source"] = "graph"
        if r.also:
            row["also"] = [f.model_dump(mode="json") for f in r.also]
        rows.append(row)
    answer: dict[str, Any] = {"results": rows}
    if found.trace_id:
        answer["trace_id"] = found.trace_id
    if found.degraded:
        answer["degraded"] = found.degraded
    return answer


async def _recall(backend: MemoryBackend, a: RecallArgs) -> CallToolResult:
    found = await backend.call(SEARCH, SearchRequest(
        query=a.query, user_id=a.user_id, project_id=a.project_id, categories=a.categories, limit=a.limit,
        trace=a.trace, collapse=a.collapse))
    answer = recall_answer(found, a.detail)
    compact = a.detail != "full"
    body = json.dumps(answer, ensure_ascii=False, separators=(",", ":") if compact else None,
                      indent=None if compact else 2)
    return CallToolResult(content=[TextContent(type="text", text=body)], structured_content=answer)


def _scope(value: str | None) -> Scope | None:
    return Scope(value) if value else None


async def _start_task(backend: MemoryBackend, a: StartTaskArgs) -> StartedTask:
    accepted = await backend.call(START_RUN, RunRequest(
        task=a.task, user_id=a.user_id, project_id=a.project_id, session_id=a.session_id, run_id=a.run_id,
        agent_id=a.agent_id))
    return StartedTask(run_id=accepted.run_id, task_id=accepted.task_id)


# ---- the table ------------------------------------------------------------------------------------------------

A = TypeVar("A", bound=BaseModel)
Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp", bound=BaseModel)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                              open_world_hint=False)


@dataclass(frozen=True)
class Tool:
    name: str
    args: type[BaseModel]  # its fields are the tool's parameters, its docstring the tool's description
    hints: ToolAnnotations
    run: Callable[[MemoryBackend, Any], Awaitable[Any]]  # (backend, validated arguments) -> the answer
    returns: Any  # the answer's type (the tool's output schema)


def ask(name: str, args: type[A], op: Operation[Req, Resp], request: Callable[[A], Req],
        hints: ToolAnnotations = READ_ONLY) -> Tool:
    """A tool that answers with what the operation returns."""
    async def run(backend: MemoryBackend, a: A) -> Resp:
        return await backend.call(op, request(a))

    return Tool(name, args, hints, run, op.response)


def write(name: str, args: type[A], op: Operation[Req, AcceptedResponse], request: Callable[[A], Req],
          hints: ToolAnnotations = ADDITIVE) -> Tool:
    """A queued write: the task id, or with `wait` its outcome (the arguments have a `wait` field)."""
    async def run(backend: MemoryBackend, a: A) -> WriteOutcome:
        return await settle(backend, await backend.call(op, request(a)), bool(getattr(a, "wait", False)))

    return Tool(name, args, hints, run, WriteOutcome)


async def _context(backend: MemoryBackend, a: ContextArgs) -> CallToolResult:
    ctx = await backend.call(CONTEXT, ContextQuery(user_id=a.user_id, project_id=a.project_id,
                                                   max_tokens=a.max_tokens, query=a.query))
    bound = a.max_chars if a.max_chars is not None or a.max_tokens is not None else DEFAULT_CONTEXT_CHARS
    return CallToolResult(content=[TextContent(type="text", text=render_markdown(ctx, bound))],
                          structured_content=ctx.model_dump(mode="json"))


TOOLS: tuple[Tool, ...] = (
    Tool("recall_memories", RecallArgs, READ_ONLY, _recall, Annotated[CallToolResult, RecallAnswer]),
    write("remember", RememberArgs, SUBMIT_RAW, lambda a: RawMemoryRequest(
        content=a.content, user_id=a.user_id, category=a.category, scope=_scope(a.scope), project_id=a.project_id,
        agent_id=a.agent_id, kind=a.kind, applies_to=a.applies_to)),
    write("remember_many", RememberManyArgs, SUBMIT_RAW_BATCH, lambda a: RawBatchRequest(user_id=a.user_id, memories=[
        RawMemoryItem(content=f.content, category=f.category, scope=_scope(f.scope), project_id=a.project_id,
                      agent_id=a.agent_id) for f in a.facts])),
    write("remember_conversation", ConversationArgs, SUBMIT_CONVERSATION, lambda a: ConversationRequest(
        messages=a.messages, user_id=a.user_id, project_id=a.project_id, agent_id=a.agent_id)),
    Tool("get_project_context", ContextArgs, READ_ONLY, _context, Annotated[CallToolResult, ContextResponse]),
    ask("search_knowledge_graph", GraphSearchArgs, GRAPH_SEARCH, lambda a: GraphSearchRequest(
        query=a.query, user_id=a.user_id, project_id=a.project_id, limit=a.limit, include_history=a.include_history)),
    ask("list_duplicate_entities", DuplicatesArgs, LIST_DUPLICATES, lambda a: DuplicateQuery(
        user_id=a.user_id, project_id=a.project_id, limit=a.limit, cursor=a.cursor)),
    ask("review_duplicate", ReviewArgs, REVIEW_DUPLICATE, lambda a: ReviewRequest(
        user_id=a.user_id, source_id=a.source_id, target_id=a.target_id, confirm=a.confirm, reviewer="mcp"),
        ADDITIVE),
    ask("merge_entities", MergeArgs, MERGE_ENTITIES, lambda a: MergeRequest(
        user_id=a.user_id, source_id=a.source_id, target_id=a.target_id), ADDITIVE),
    ask("list_memories", ListArgs, LIST_MEMORIES, lambda a: MemoryListQuery(
        user_id=a.user_id, scope=a.scope, category=a.category, project_id=a.project_id, agent_id=a.agent_id,
        limit=a.limit, cursor=a.cursor, include_superseded=a.include_superseded,
        order=ListOrder(a.order) if a.order else None)),
    write("delete_memories", DeleteArgs, SUBMIT_BULK_DELETE, lambda a: BulkDeleteRequest(
        user_id=a.user_id, memory_ids=a.memory_ids, scope=_scope(a.scope), category=a.category,
        project_id=a.project_id, agent_id=a.agent_id, all=a.all), DESTRUCTIVE),
    ask("get_task_status", TaskArgs, TASK_STATUS, lambda a: TaskQuery(task_id=a.task_id)),
    Tool("start_task", StartTaskArgs, ADDITIVE, _start_task, StartedTask),
    write("record_task_step", RecordStepArgs, RECORD_STEP, lambda a: RunStepQuery(
        run_id=a.run_id, user_id=a.user_id, seq=a.seq, action=a.action, thought=a.thought, tool_calls=a.tool_calls)),
    write("finish_task", FinishTaskArgs, COMPLETE_RUN, lambda a: RunCompleteQuery(
        run_id=a.run_id, user_id=a.user_id, success=a.success, summary=a.summary, error_kind=a.error_kind)),
    ask("recall_similar_tasks", RecallTasksArgs, SEARCH_RUNS, lambda a: RunSearchRequest(
        query=a.query, user_id=a.user_id, project_id=a.project_id, outcome=a.outcome, tool=a.tool,
        error_kind=a.error_kind, limit=a.limit)),
    write("update_memory", UpdateArgs, SUBMIT_UPDATE, lambda a: UpdateQuery(
        memory_id=a.memory_id, content=a.content, category=a.category, user_id=a.user_id), DESTRUCTIVE),
    write("add_entity", AddEntityArgs, ADD_ENTITY, lambda a: EntityWrite(
        user_id=a.user_id, name=a.name, type=a.type, aliases=a.aliases, description=a.description,
        project_id=a.project_id)),
    write("add_relationship", AddRelationshipArgs, ADD_RELATION, lambda a: RelationWrite.model_validate({
        "user_id": a.user_id, "source": {"name": a.source, "type": a.source_type}, "predicate": a.predicate,
        "target": {"name": a.target, "type": a.target_type}, "confidence": a.confidence, "valid_at": a.valid_at,
        "project_id": a.project_id})),
    write("add_fact", AddFactArgs, ADD_FACT, lambda a: FactWrite.model_validate({
        "user_id": a.user_id, "subject": {"name": a.subject, "type": a.subject_type}, "predicate": a.predicate,
        "object": {"name": a.object, "type": a.object_type}, "valid_at": a.valid_at, "project_id": a.project_id})),
    ask("get_facts_about", FactsAboutArgs, FACTS_ABOUT, lambda a: FactsQuery(
        user_id=a.user_id, name=a.name, project_id=a.project_id, include_history=a.include_history, limit=a.limit)),
    ask("query_graph", QueryGraphArgs, QUERY_GRAPH, lambda a: GraphQuery.model_validate(a.model_dump())),
)


# The eight tools every agent gets (the seed's clients call these); the rest come by toolset (MCP_TOOLSETS).
CORE: Final = ("recall_memories", "remember", "remember_conversation", "get_project_context",
               "search_knowledge_graph", "list_memories", "delete_memories", "get_task_status")
TOOLSETS: Final[dict[str, tuple[str, ...]]] = {
    "memory": ("remember_many", "update_memory"),
    "graph": ("get_facts_about", "query_graph", "add_entity", "add_relationship", "add_fact",
              "list_duplicate_entities", "review_duplicate", "merge_entities"),
    "runs": ("start_task", "record_task_step", "finish_task", "recall_similar_tasks"),
}


def tools_for(toolsets: Iterable[str] = ()) -> tuple[Tool, ...]:
    """The core tools plus those of the named toolsets ("all": every tool), in TOOLS' order."""
    chosen = set(toolsets)
    names = set(CORE).union(*(TOOLSETS[t] for t in TOOLSETS if t in chosen or "all" in chosen))
    unknown = chosen - set(TOOLSETS) - {"all"}
    if unknown:
        raise ValueError(f"unknown MCP toolset(s) {sorted(unknown)}: choose from {sorted(TOOLSETS)} or all")
    return tuple(t for t in TOOLS if t.name in names)


async def settle(backend: MemoryBackend, accepted: AcceptedResponse, wait: bool) -> WriteOutcome:
    if not wait:
        return WriteOutcome(
            task_id=accepted.task_id, status="accepted",
            message="Queued. Call get_task_status with this task_id to see when it is stored.",
        )
    deadline = time.monotonic() + WAIT_SECONDS
    delay = 0.05
    while True:
        task = await backend.call(TASK_STATUS, TaskQuery(task_id=accepted.task_id))
        remaining = deadline - time.monotonic()
        if task.status in (TaskStatus.COMPLETED, TaskStatus.FAILED) or remaining <= 0:
            break
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 1.0)
    if task.status is TaskStatus.COMPLETED:
        message = "Done."
    elif task.status is TaskStatus.FAILED:
        message = "The write failed; see error."
    elif task.status is TaskStatus.RETRYING and task.retry is not None:
        message = (f"Waiting on {task.retry.dependency}, which is slow or away (attempt {task.retry.attempt}, next "
                   f"at {task.retry.next_at}); it will be stored. Call get_task_status with this task_id later.")
    else:
        message = (f"Still {task.status.value} after {WAIT_SECONDS:.0f} s. "
                   "Call get_task_status with this task_id later.")
    result = task.result.model_dump(mode="json") if task.result is not None else None
    return WriteOutcome(task_id=task.task_id, status=task.status, result=result, error=task.error,
                        message=message)
