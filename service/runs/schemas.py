"""Request and response models of the runs API (`/v1/runs`). Every input has a length bound."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.core.domain import ID_PATTERN
from service.schemas.conversations import MessageHit
from service.schemas.memories import AcceptedResponse, ContextResponse, OptionalId, TenantId
from service.schemas.search import SearchResponse

MAX_TASK_CHARS = 2000
MAX_ACTION_CHARS = 2000
MAX_THOUGHT_CHARS = 4000
MAX_SUMMARY_CHARS = 4000
MAX_TOOL_CHARS = 128
MAX_ERROR_KIND_CHARS = 64
MAX_STEPS = 200  # in one one-shot write
MAX_TOOL_CALLS = 50  # per step, in one write
MAX_TOUCHED = 20
MAX_SEQ = 100_000
RUN_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
ERROR_KIND_PATTERN = r"^[A-Za-z0-9_.:\-]{1,64}$"
Outcome = Literal["success", "failure", "open"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Touched(_Body):
    """An entity a tool call touched (a file, a service, a person); resolved like a memory's entities."""

    name: str = Field(min_length=1, max_length=200)
    type: str = Field(default="thing", min_length=1, max_length=64)


class ToolCallIn(_Body):
    tool: str = Field(min_length=1, max_length=MAX_TOOL_CHARS)
    # Arguments and result are redacted and cut to MAX_TOOL_TEXT_CHARS (as JSON text) before they are queued.
    arguments: dict[str, Any] = Field(default_factory=dict, max_length=100)
    result: str | None = Field(default=None, max_length=200_000)
    status: Literal["ok", "error"] = "ok"
    error: str | None = Field(default=None, max_length=20_000)
    error_kind: str | None = Field(default=None, pattern=ERROR_KIND_PATTERN)
    duration_ms: int | None = Field(default=None, ge=0, le=86_400_000)
    touched: list[Touched] = Field(default_factory=list, max_length=MAX_TOUCHED)
    seq: int | None = Field(default=None, ge=0, le=MAX_SEQ,
                            description="Order within the step; without it, the order the API accepted them in")


class ToolCallRequest(ToolCallIn):
    user_id: str | None = TenantId


class StepIn(_Body):
    seq: int = Field(ge=0, le=MAX_SEQ)
    action: str = Field(min_length=1, max_length=MAX_ACTION_CHARS)
    thought: str | None = Field(default=None, max_length=MAX_THOUGHT_CHARS)
    tool_calls: list[ToolCallIn] = Field(default_factory=list, max_length=MAX_TOOL_CALLS)


class StepRequest(StepIn):
    user_id: str | None = TenantId


class OutcomeIn(_Body):
    success: bool
    summary: str = Field(default="", max_length=MAX_SUMMARY_CHARS)
    error_kind: str | None = Field(default=None, pattern=ERROR_KIND_PATTERN)


class CompleteRequest(OutcomeIn):
    user_id: str | None = TenantId


class RunRequest(_Body):
    """Start a run; with `steps` (and `outcome`) it is the one-shot write of a whole trace."""

    user_id: str | None = TenantId
    run_id: str | None = Field(default=None, pattern=RUN_ID_PATTERN,
                               description="Client-chosen; without it the run id is the task id of this write")
    project_id: str | None = OptionalId
    session_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)
    agent_id: str | None = OptionalId
    task: str = Field(min_length=1, max_length=MAX_TASK_CHARS)
    steps: list[StepIn] = Field(default_factory=list, max_length=MAX_STEPS)
    outcome: OutcomeIn | None = None


class RunSearchRequest(_Body):
    query: str = Field(min_length=1, max_length=2000)
    user_id: str | None = TenantId
    project_id: str | None = OptionalId
    outcome: Outcome | None = None
    tool: str | None = Field(default=None, min_length=1, max_length=MAX_TOOL_CHARS)
    error_kind: str | None = Field(default=None, pattern=ERROR_KIND_PATTERN)
    limit: int = Field(default=10, ge=1, le=100)


class RunAccepted(AcceptedResponse):
    run_id: str


class ToolCallOut(BaseModel):
    id: str
    seq: int | None = None
    tool: str
    arguments: str | None = None  # redacted JSON text
    result: str | None = None
    status: str
    error: str | None = None
    error_kind: str | None = None
    duration_ms: int | None = None
    touched: list[dict[str, Any]] = Field(default_factory=list)
    accepted_at: str | None = None


class StepOut(BaseModel):
    seq: int
    action: str | None = None  # None: a tool call of this step arrived before the step itself
    thought: str | None = None
    tool_calls: list[ToolCallOut] = Field(default_factory=list)


class RunSummary(BaseModel):
    run_id: str
    task: str | None = None  # None: a step arrived before the run's start
    session_id: str | None = None
    project_id: str | None = None
    agent_id: str | None = None
    outcome: Outcome
    summary: str | None = None
    error_kind: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    steps: int = 0
    tool_calls: int = 0
    failed_tool_calls: int = 0


class RunOut(RunSummary):
    status: Literal["ok"] = "ok"
    user_id: str
    trace: list[StepOut] = Field(default_factory=list)


class RunPage(BaseModel):
    status: Literal["ok"] = "ok"
    items: list[RunSummary]
    next_cursor: str | None


class RunHit(RunSummary):
    score: float
    signals: dict[str, int] = Field(default_factory=dict, description="retriever -> rank (1-based)")
    matched_tool_calls: list[ToolCallOut] = Field(default_factory=list)


class ReasoningHit(RunHit):
    """A prior run beside a memory search (`include: ["traces"]`)."""

    via: list[Literal["query", "entities"]] = Field(
        description="query: the run matches the search's query; entities: its tool calls touched an entity "
                    "the returned memories mention")
    entities: list[str] = Field(default_factory=list, description="the shared entities' names (via entities)")


class SearchWithReasoning(SearchResponse):
    reasoning: list[ReasoningHit] | None = Field(
        default=None, description='With include: ["traces"]: prior task runs, their outcome and tool calls.')


class RunSearchResponse(BaseModel):
    status: Literal["ok"] = "ok"
    results: list[RunHit]


class RunStats(BaseModel):
    status: Literal["ok"] = "ok"
    runs: int
    completed: int
    succeeded: int
    failed: int
    open: int
    success_rate: float | None  # of the completed runs; None when none is completed
    tool_calls: int
    failed_tool_calls: int
    failures_by_tool: dict[str, int]
    failures_by_error_kind: dict[str, int]


class LaterCall(BaseModel):
    tool: str
    arguments: str | None = None
    step: str | None = None


class Lesson(BaseModel):
    run_id: str
    session_id: str | None = None
    task: str | None = None
    tool: str = Field(description="the tool whose call failed")
    arguments: str | None = Field(default=None, description="its arguments (redacted JSON text)")
    error: str | None = None
    error_kind: str | None = None
    outcome: Outcome
    summary: str | None = Field(default=None, description="how the run ended, in the agent's words")
    later: list[LaterCall] = Field(default_factory=list, description="successful calls after the failure")
    resolved: bool = Field(description="the run succeeded, or a later call of the same tool went through")
    at: str | None = None


class ContextWithLessons(ContextResponse):
    lessons: list[Lesson] = Field(default_factory=list,
                                  description="failed tool calls of earlier sessions and what came after them")


class EntityHit(BaseModel):
    id: str
    name: str
    type: str | None = None
    group_id: str | None = None
    aliases: list[str] = Field(default_factory=list)
    score: float = Field(description="1.0 = the query is the entity's name; else full-text score / the best one's")
    mentions: int = Field(description="memories that mention it")
    related: list[str] = Field(default_factory=list, description="names its live facts relate it to")


class ChatTurn(SearchWithReasoning):
    messages: list[MessageHit] | None = Field(
        default=None, description='With include: ["messages"]: message hits, the current session\'s first.')
    entities: list[EntityHit] | None = Field(
        default=None, description='With include: ["entities"]: the entities the query names.')
