"""The MCP tools' arguments: the field types every tool shares (user, project, query, category, scope, wait) and the
arguments of the memory tools. A model's fields and docstring are the tool's input schema and description: what
the agent reads. The graph tools' are graph_args.py, the task-run tools' run_args.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from service.core.domain import CATEGORIES, ID_PATTERN, MAX_BATCH_MEMORIES, Message

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


class RecallArgs(BaseModel):
    """Search the user's memories: by meaning (embeddings), by exact words and names (BM25), through the
    knowledge graph (memories about the entities the query names and their neighbours) and, when the query
    names a time ("last May", "in 2023"), by when it happened; one fused ranking, each result's `signals`
    saying which of these found it (detail="full"; the default answer is compact: content, id, category, date
    and source of each). With project_id: global memories plus that project's; without: global memories only.
    Use it before answering anything about the user, their preferences or projects."""

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
    detail: Annotated[Literal["compact", "full"], Field(description=(
        "compact (default): each memory as {id, content, category, date (YYYY-MM-DD, when it happened), source "
        "(vector or graph)}, plus `also` when something was folded into it; full: every field of the search "
        "API's result too (score, signals, scope, project_id, metadata, agent_id, times, graph fields)."))] = "compact"


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


class ListArgs(BaseModel):
    """A page of the user's stored memories (with ids, for delete_memories), newest first. Without scope and
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
    order: Annotated[Literal["newest", "oldest", "id"] | None, Field(
        description="newest first (the default), oldest first, or by id; a cursor goes on in its own order.")] = None


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
