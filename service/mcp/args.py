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

# The categories by default scope, once (remember's `category`); the other tools' category fields list the enum.
CATEGORY_HELP = "; ".join(
    f"{scope}: " + ", ".join(c.name for c in CATEGORIES.values() if c.default_scope == scope)
    for scope in ("global", "project", "flexible"))
CATEGORY_ENUM: dict[str, Any] = {"enum": list(CATEGORIES)}

UserId = Annotated[
    str,
    Field(min_length=1, max_length=128, pattern=ID_PATTERN,
          description="Whose memories: a stable id for the person (letters, digits, _.:@-)."),
]
ProjectId = Annotated[
    str | None,
    Field(min_length=1, max_length=128, pattern=ID_PATTERN,
          description="The project (e.g. the repository name): reads add its memories to the global ones."),
]
AgentId = Annotated[
    str | None,
    Field(min_length=1, max_length=128, pattern=ID_PATTERN, description="Which agent writes."),
]
Query = Annotated[str, Field(min_length=1, max_length=2000, description="What to look for, in plain words.")]
EntityIdArg = Annotated[str, Field(min_length=1, max_length=128, description="An entity id (list_duplicate_entities).")]
Category = Annotated[
    str,
    Field(min_length=1, max_length=64, json_schema_extra=CATEGORY_ENUM,
          description=f"By default scope: {CATEGORY_HELP}. Project ones need project_id."),
]
OptionalCategory = Annotated[
    Annotated[str, Field(min_length=1, max_length=64, json_schema_extra=CATEGORY_ENUM)] | None,
    Field(description="Only this category."),
]
Categories = Annotated[
    list[Annotated[str, Field(json_schema_extra=CATEGORY_ENUM)]] | None,
    Field(max_length=13, description="Only these categories."),
]
ScopeArg = Annotated[
    Literal["global", "project"] | None,
    Field(description="global (everywhere) or project (needs project_id); default: the category's."),
]
Wait = Annotated[
    bool,
    Field(description=f"Wait up to {WAIT_SECONDS:.0f} s for the result (else: the task id at once)."),
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
    """Search the user's memories by meaning, words, the knowledge graph and time; best first, only what is
    relevant (an empty list when nothing is). Call it before answering about the user or their projects."""

    query: Query
    user_id: UserId
    project_id: ProjectId = None
    categories: Categories = None
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many results.")] = 10
    trace: Annotated[bool, Field(description="Record a retrieval trace (trace_id in the answer).")] = False
    collapse: Annotated[bool, Field(description="Fold a fact into the excerpt it came from (`also`).")] = True
    detail: Annotated[Literal["compact", "full"], Field(description=(
        "compact: id, content, category, date, source; full: every field of the search API."))] = "compact"


class RememberArgs(BaseModel):
    """Store one fact you already categorised. Returns the task id; with wait=true the stored memory."""

    content: Annotated[str, Field(description="One self-contained fact, e.g. 'Prefers tabs over spaces'.")]
    user_id: UserId
    category: Category
    project_id: ProjectId = None
    scope: ScopeArg = None
    agent_id: AgentId = None
    wait: Wait = False
    kind: Annotated[str | None, Field(
        max_length=64, description="A preference's topic ('indentation'): a newer one of the kind replaces it.")] = None
    applies_to: Annotated[list[str], Field(
        max_length=20, description="A preference's subjects (a tool, a person).")] = []


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
    """Extract facts from a conversation and store them, with its excerpts (nothing said is lost). Returns the
    task id; with wait=true the stored memories."""

    messages: Annotated[
        list[Message],
        Field(min_length=1, max_length=500,
              description="Oldest first: {role, content, id?, timestamp? (when it was said)}."),
    ]
    user_id: UserId
    project_id: ProjectId = None
    agent_id: AgentId = None
    wait: Wait = False


class ContextArgs(BaseModel):
    """What is known for a session, most useful first, as a dated markdown block for your context (call it at
    the start of a session)."""

    user_id: UserId
    project_id: ProjectId = None
    query: Annotated[str | None, Field(min_length=1, max_length=2000,
                                       description="What the session is about; its matches come first.")] = None
    max_tokens: Annotated[int | None, Field(ge=50, le=100_000, description="Token budget of the text.")] = None
    max_chars: Annotated[int | None, Field(ge=200, le=200_000, description="Character bound (default 4000).")] = None


class ListArgs(BaseModel):
    """A page of the user's memories with their ids, newest first; pass next_cursor back as cursor."""

    user_id: UserId
    scope: Annotated[Literal["global", "project"] | None, Field(description="Only this scope.")] = None
    category: OptionalCategory = None
    project_id: ProjectId = None
    agent_id: AgentId = None
    limit: Annotated[int, Field(ge=1, le=500, description="Page size.")] = 50
    cursor: Annotated[str | None, Field(max_length=64, description="next_cursor of the previous page.")] = None
    include_superseded: Annotated[bool, Field(description="Also replaced values (history).")] = False
    order: Annotated[Literal["newest", "oldest", "id"] | None, Field(description="Default: newest.")] = None


class DeleteArgs(BaseModel):
    """Delete memories by id or by filter (scope, category, project_id, agent_id), never both. Queued like a
    write."""

    user_id: UserId
    memory_ids: Annotated[
        list[str] | None, Field(min_length=1, max_length=1000, description="These memories.")
    ] = None
    scope: Annotated[Literal["global", "project"] | None, Field(description="Only this scope.")] = None
    category: OptionalCategory = None
    project_id: ProjectId = None
    agent_id: AgentId = None
    all: Annotated[
        bool, Field(description="true, with no ids or filter: every memory of the user.")
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
    """A queued write's status: queued, processing, retrying, completed (with result) or failed (with error)."""

    task_id: TaskId
