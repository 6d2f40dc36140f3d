"""The MCP tools, one entry each in `TOOLS`: the tool's arguments (a model whose fields and docstring are the
tool's input schema and description), the backend operation it asks for (service/mcp/backend.py) and how its
arguments become that operation's request. server.py registers them; no operation is implemented here.

The only logic of their own: the bounded wait of `wait=true` writes (polling the task status, as a REST client
would) and the markdown text of the project context.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from service.context_format import render_markdown
from service.domain import CATEGORIES, ID_PATTERN, MAX_BATCH_MEMORIES, Message, Scope, TaskStatus
from service.graph_api.vocabulary import ENTITY_TYPES
from service.mcp.backend import (
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
from service.runs.schemas import (
    ERROR_KIND_PATTERN,
    MAX_ACTION_CHARS,
    MAX_SEQ,
    MAX_SUMMARY_CHARS,
    MAX_TASK_CHARS,
    MAX_THOUGHT_CHARS,
    MAX_TOOL_CALLS,
    RUN_ID_PATTERN,
    Outcome,
    RunRequest,
    RunSearchRequest,
    ToolCallIn,
)
from service.schemas import (
    AcceptedResponse,
    BulkDeleteRequest,
    ContextResponse,
    ConversationRequest,
    GraphSearchRequest,
    MergeRequest,
    RawBatchRequest,
    RawMemoryItem,
    RawMemoryRequest,
    ReviewRequest,
    SearchRequest,
)
from service.schemas.graph_api import EntityWrite, FactWrite, GraphQuery, RelationWrite

DEFAULT_CONTEXT_CHARS = 4000  # the context text's bound without max_chars or max_tokens

# How long a write with wait=true polls its task before answering with the task id and its status.
WAIT_SECONDS = 30.0

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


# ---- the tools' arguments (field descriptions and docstrings are what the agent reads) -------------------------


class RecallArgs(BaseModel):
    """Search the user's memories: by meaning (embeddings), by exact words and names (BM25), through the
    knowledge graph (memories about the entities the query names and their neighbours) and, when the query
    names a time ("last May", "in 2023"), by when it happened; one fused ranking, each result's `signals`
    saying which of these found it. With project_id: global memories plus that project's; without: global
    memories only. Use it before answering anything about the user, their preferences or projects."""

    query: Query
    user_id: UserId
    project_id: ProjectId = None
    categories: Categories = None
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many results.")] = 10
    trace: Annotated[bool, Field(description="Record which memories came back and which entities were used "
                                             "(trace_id in the answer; kept TRACE_TTL_DAYS).")] = False
    collapse: Annotated[bool, Field(description=(
        "Fold a memory whose source messages another result covers (a fact and the conversation excerpt it "
        "came from) into that result's `also`, so it takes no slot; false lists each on its own."))] = True


class RememberArgs(BaseModel):
    """Store one fact you already categorised (no extraction). Project categories (tech_stack, convention,
    architecture, dependency) and scope=project need project_id. Returns the task id; with wait=true the
    stored memory (result.memories), or after the bounded wait the task id with its current status."""

    content: Annotated[str, Field(description="One self-contained fact, e.g. 'Prefers tabs over spaces'.")]
    user_id: UserId
    category: Category
    project_id: ProjectId = None
    scope: ScopeArg = None
    agent_id: AgentId = None
    wait: Wait = False
    kind: Annotated[str | None, Field(
        max_length=64, description="For a preference: what it is about (e.g. 'budget', 'indentation'). A newer "
                                   "preference of the same kind and applies_to replaces the older one.")] = None
    applies_to: Annotated[list[str], Field(
        max_length=20, description="For a preference: entity names it applies to (a tool, a person).")] = []


class RememberManyArgs(BaseModel):
    """Store several facts you already categorised as one write (one task, one embedding batch: cheaper than
    one remember per fact). Each is checked as remember checks one; an error names it (memories[i]); a fact
    repeating an earlier one of the list is stored once. Returns the task id; with wait=true the stored
    memories in order (result.memories)."""

    facts: Annotated[list[Fact], Field(
        min_length=1, max_length=MAX_BATCH_MEMORIES,
        description=f"1-{MAX_BATCH_MEMORIES} facts: {{content, category, scope?}}.")]
    user_id: UserId
    project_id: ProjectId = None
    agent_id: AgentId = None
    wait: Wait = False


class ConversationArgs(BaseModel):
    """Extract categorised facts from a conversation and store them (the extraction path: Gemini when
    configured, else rule-based); messages no fact came from are stored as 'interaction' memories
    ("<role>: <text>" lines), so nothing said is lost. Every memory lists its source_message_ids.
    Returns the task id; with wait=true the stored memories."""

    messages: Annotated[
        list[Message],
        Field(min_length=1, max_length=500,
              description="The exchange, oldest first: {role: user|assistant|system|tool, content, id?, "
                          "timestamp?}. Facts are extracted from the user's turns; every other message "
                          "with content is kept as an 'interaction' memory of its window. id (1-128 "
                          "chars) names the message in each memory's source_message_ids (else its "
                          "0-based index); timestamp (ISO 8601 or a plain English date; one that does "
                          "not parse is ignored) becomes the memory's occurred_at."),
    ]
    user_id: UserId
    project_id: ProjectId = None
    agent_id: AgentId = None
    wait: Wait = False


class ContextArgs(BaseModel):
    """What is known for a session: the user's global memories plus the project's (with project_id), most
    useful first (what `query` finds, facts before the conversation excerpts they came from, the project's
    before global ones, recent and often recalled), grouped by category. The text is a compact markdown block
    for your context that says how many memories it left out; the structured content has each listed memory
    with its id."""

    user_id: UserId
    project_id: ProjectId = None
    query: Annotated[str | None, Field(min_length=1, max_length=2000,
                                       description="What the session is about; its matches come first.")] = None
    max_tokens: Annotated[int | None, Field(ge=50, le=100_000, description=(
        "Token budget of the markdown text (the embedder's tokenizer); the most useful memories that fit."))] = None
    max_chars: Annotated[int | None, Field(ge=200, le=200_000, description=(
        "Bound of the markdown text in characters (default 4000 without max_tokens).")) ] = None


class GraphSearchArgs(BaseModel):
    """Facts from the temporal knowledge graph (subject, predicate, object, since when, until when), e.g.
    'user works_at Acme Corp' or 'shop uses PostgreSQL'. With project_id: global facts plus that
    project's; without: all of the user's."""

    query: Query
    user_id: UserId
    project_id: ProjectId = None
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many facts.")] = 10
    include_history: Annotated[
        bool, Field(description="Also facts that are no longer true (superseded or deleted).")
    ] = False


class DuplicatesArgs(BaseModel):
    """Entity pairs that may be one thing ("Mel" / "Melanie", "Postgres" / "PostgreSQL") which the resolution
    gate left for review, highest score first, each with both entities (name, type, aliases, how many
    memories mention it) and the gate's reason. Decide with review_duplicate."""

    user_id: UserId
    project_id: ProjectId = None
    limit: Annotated[int, Field(ge=1, le=500, description="Page size.")] = 20
    cursor: Annotated[str | None, Field(max_length=200, description="next_cursor of the previous page.")] = None


class ReviewArgs(BaseModel):
    """Decide a pair from list_duplicate_entities. Only confirm when the memories make it clear that both
    names denote the same thing; a merge can be undone, but ask the user when unsure."""

    user_id: UserId
    source_id: EntityIdArg
    target_id: EntityIdArg
    confirm: Annotated[bool, Field(description="true: they are one entity (source merges into target); "
                                               "false: they differ (never proposed again).")]


class MergeArgs(BaseModel):
    """Merge two entities of the user's graph the user said are one (same group and compatible types only):
    the source's name becomes an alias of the target and the target gains its mentions and facts.
    Reversible with POST /v1/graph/entities/{source_id}/unmerge."""

    user_id: UserId
    source_id: EntityIdArg
    target_id: EntityIdArg


class ListArgs(BaseModel):
    """A page of the user's stored memories (with ids, for delete_memories), ordered by id. Without scope and
    project_id: all of them; with project_id: global plus that project's. Pass next_cursor back as cursor."""

    user_id: UserId
    scope: Annotated[Literal["global", "project"] | None, Field(description="Only this scope.")] = None
    category: OptionalCategory = None
    project_id: ProjectId = None
    agent_id: AgentId = None
    limit: Annotated[int, Field(ge=1, le=500, description="Page size.")] = 50
    cursor: Annotated[str | None, Field(max_length=64, description="next_cursor of the previous page.")] = None
    include_superseded: Annotated[bool, Field(
        description="Also the preferences a newer one superseded (their history, with superseded_by).")] = False


class DeleteArgs(BaseModel):
    """Delete memories by id (memory_ids) or by filter (scope, category, project_id, agent_id), never both.
    Deletes are queued like writes: with wait=true the result lists the deleted ids. Graph facts that only
    these memories supported are expired (kept as history)."""

    user_id: UserId
    memory_ids: Annotated[
        list[str] | None, Field(min_length=1, max_length=1000, description="Delete exactly these memories.")
    ] = None
    scope: Annotated[Literal["global", "project"] | None, Field(description="Filter: this scope.")] = None
    category: OptionalCategory = None
    project_id: ProjectId = None
    agent_id: AgentId = None
    all: Annotated[
        bool, Field(description="true (with no ids and no filter) deletes every memory of the user.")
    ] = False
    wait: Wait = False


class UpdateArgs(BaseModel):
    """Correct a stored memory: new content (and optionally a new category) for memory_id (an id from
    recall_memories or list_memories). It is re-embedded and re-linked in the knowledge graph; facts only the old
    content supported are expired (kept as history). Returns the task id; with wait=true the updated memory."""

    memory_id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$",
                                    description="The memory to correct.")]
    content: Annotated[str, Field(min_length=1, description="The corrected fact, self-contained.")]
    user_id: UserId
    category: Annotated[
        Annotated[str, Field(min_length=1, max_length=64, json_schema_extra=CATEGORY_ENUM)] | None,
        Field(description="A new category (default: unchanged)."),
    ] = None
    wait: Wait = False


class TaskArgs(BaseModel):
    """Status of a queued write or delete: queued, processing, completed (with result) or failed (with
    error)."""

    task_id: TaskId


RunIdArg = Annotated[str, Field(pattern=RUN_ID_PATTERN, description="The run_id start_task returned.")]
ErrorKind = Annotated[str | None, Field(pattern=ERROR_KIND_PATTERN,
                                        description="A short label of what went wrong, e.g. db_down, timeout.")]


class StartTaskArgs(BaseModel):
    """Start recording a task you are about to work on (a "run"): what you try, which tool calls fail, how it
    ends. Record each step with record_task_step and the end with finish_task; later sessions find it with
    recall_similar_tasks (and the project context shows its failures as lessons). Returns the run_id."""

    task: Annotated[str, Field(min_length=1, max_length=MAX_TASK_CHARS, description="The task, in a sentence.")]
    user_id: UserId
    project_id: ProjectId = None
    session_id: Annotated[str | None, Field(min_length=1, max_length=128, pattern=ID_PATTERN,
                                            description="The agent session this task belongs to.")] = None
    run_id: Annotated[str | None, Field(pattern=RUN_ID_PATTERN, description=(
        "Your own id for the run (letters, digits, _ and -); without it the answer's run_id."))] = None
    agent_id: AgentId = None


class StartedTask(BaseModel):
    """A queued start of a run."""

    run_id: str
    task_id: str
    status: Literal["accepted"] = "accepted"
    message: str = "Recording. Add steps with record_task_step and the outcome with finish_task."


class RecordStepArgs(BaseModel):
    """Record one step of a started task: what you did (action), optionally why (thought), and the tool calls
    it made with their arguments, result or error. Failed calls (status=error, with the error text) are what
    later sessions learn from. Secrets are redacted and long texts cut by the service. Steps may arrive in any
    order; they read back in seq order."""

    run_id: RunIdArg
    user_id: UserId
    seq: Annotated[int, Field(ge=0, le=MAX_SEQ, description="The step's position in the task: 0, 1, 2, ...")]
    action: Annotated[str, Field(min_length=1, max_length=MAX_ACTION_CHARS, description="What this step did.")]
    thought: Annotated[str | None, Field(max_length=MAX_THOUGHT_CHARS, description="Why (optional).")] = None
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=MAX_TOOL_CALLS, description=(
        "The step's tool calls: {tool, arguments?, result?, status: ok|error, error?, error_kind?, duration_ms?, "
        "touched?: [{name, type}]} (touched: the files, services or people the call acted on)."))] = []
    wait: Wait = False


class FinishTaskArgs(BaseModel):
    """Record how a started task ended: success or not, a summary of what worked (the fix, when something had
    failed: later sessions see it beside the failure), and an error kind when it failed."""

    run_id: RunIdArg
    user_id: UserId
    success: Annotated[bool, Field(description="true: the task was done.")]
    summary: Annotated[str, Field(max_length=MAX_SUMMARY_CHARS, description=(
        "What happened, e.g. 'Postgres was not running; docker compose up -d db fixed it'."))] = ""
    error_kind: ErrorKind = None
    wait: Wait = False


class RecallTasksArgs(BaseModel):
    """Find earlier tasks like this one (by meaning and by words, including their tool calls' commands and
    errors), each with its outcome, summary and the tool calls that matched: use it before a task, or when a
    tool call fails, to see what happened last time and what fixed it."""

    query: Query
    user_id: UserId
    project_id: ProjectId = None
    outcome: Annotated[Outcome | None, Field(description="Only runs that ended so (open = not finished).")] = None
    tool: Annotated[str | None, Field(min_length=1, max_length=128,
                                      description="Only runs with a call of this tool.")] = None
    error_kind: ErrorKind = None
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many runs.")] = 5


async def _start_task(backend: MemoryBackend, a: StartTaskArgs) -> StartedTask:
    accepted = await backend.call(START_RUN, RunRequest(
        task=a.task, user_id=a.user_id, project_id=a.project_id, session_id=a.session_id, run_id=a.run_id,
        agent_id=a.agent_id))
    return StartedTask(run_id=accepted.run_id, task_id=accepted.task_id)
EntityName = Annotated[str, Field(min_length=1, max_length=200,
                                  description="An entity's name (an existing entity is found by name or alias).")]
EntityTypeArg = Annotated[str, Field(min_length=1, max_length=64, description=(
    f"Its type, one of: {', '.join(ENTITY_TYPES)} (a synonym such as company or city is mapped)."))]
PredicateArg = Annotated[str, Field(min_length=1, max_length=100, description=(
    "How the subject relates to the object, e.g. works_at, uses, lives_in, prefers, depends_on, decided "
    "(free text is normalised: 'works for' -> works_at)."))]
ValidAt = Annotated[str | None, Field(max_length=64, description="Since when it is true (ISO 8601); default: now.")]


class AddEntityArgs(BaseModel):
    """Tell the knowledge graph about an entity (a person, organization, project, tool...). It goes through
    entity resolution: the result says whether it was created, merged into an entity the graph already had,
    left pending review, or already existing, with the entity id."""

    user_id: UserId
    name: EntityName
    type: EntityTypeArg = "thing"
    aliases: Annotated[list[str], Field(max_length=20, description="Other names of it.")] = []
    description: Annotated[str | None, Field(max_length=2000, description="What it is, in a sentence.")] = None
    project_id: ProjectId = None
    wait: Wait = False


class AddRelationshipArgs(BaseModel):
    """Relate two entities of the knowledge graph (by name; new names go through entity resolution), with an
    optional confidence. A newer value of a single-valued relation (works_at, lives_in...) replaces the older."""

    user_id: UserId
    source: EntityName
    predicate: PredicateArg
    target: EntityName
    source_type: EntityTypeArg = "thing"
    target_type: EntityTypeArg = "thing"
    confidence: Annotated[float | None, Field(ge=0, le=1, description="How sure, 0 to 1.")] = None
    valid_at: ValidAt = None
    project_id: ProjectId = None
    wait: Wait = False


class AddFactArgs(BaseModel):
    """Store a subject-predicate-object fact in the knowledge graph, e.g. Alice works_at Acme. A newer value of
    a single-valued predicate (works_at, lives_in...) replaces the older one, which stays as history."""

    user_id: UserId
    subject: EntityName
    predicate: PredicateArg
    object: EntityName
    subject_type: EntityTypeArg = "thing"
    object_type: EntityTypeArg = "thing"
    valid_at: ValidAt = None
    project_id: ProjectId = None
    wait: Wait = False


class FactsAboutArgs(BaseModel):
    """Everything the knowledge graph holds about one entity (by name or alias; merged names too): its facts in
    both directions, current ones first, then history with valid_at / invalid_at."""

    user_id: UserId
    name: EntityName
    project_id: ProjectId = None
    include_history: Annotated[bool, Field(description="Also facts that are no longer true.")] = True
    limit: Annotated[int, Field(ge=1, le=500, description="At most this many facts.")] = 50


class QueryGraphArgs(BaseModel):
    """Structural questions over typed relations, which similarity search cannot answer: "which projects use
    knowledge graphs" = subject_type project, predicate uses, object "knowledge graphs"; "who works at Acme" =
    predicate works_at, object Acme. Every field given must hold."""

    user_id: UserId
    subject: Annotated[str | None, Field(max_length=200, description="The subject's name.")] = None
    subject_type: Annotated[str | None, Field(max_length=64, description="The subject's entity type.")] = None
    predicate: Annotated[str | None, Field(max_length=100, description="The relation, e.g. uses, works_at.")] = None
    object: Annotated[str | None, Field(max_length=200, description="The object's name.")] = None
    object_type: Annotated[str | None, Field(max_length=64, description="The object's entity type.")] = None
    as_of: Annotated[str | None, Field(max_length=64, description="Facts true at this time (ISO 8601); "
                                                                  "default: the current ones.")] = None
    project_id: ProjectId = None
    limit: Annotated[int, Field(ge=1, le=500, description="At most this many facts.")] = 50


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
    ask("recall_memories", RecallArgs, SEARCH, lambda a: SearchRequest(
        query=a.query, user_id=a.user_id, project_id=a.project_id, categories=a.categories, limit=a.limit,
        trace=a.trace, collapse=a.collapse)),
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
        limit=a.limit, cursor=a.cursor, include_superseded=a.include_superseded)),
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
    else:
        message = (f"Still {task.status.value} after {WAIT_SECONDS:.0f} s. "
                   "Call get_task_status with this task_id later.")
    return WriteOutcome(task_id=task.task_id, status=task.status, result=task.result, error=task.error,
                        message=message)
