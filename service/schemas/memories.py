"""Models of memories, writes and tasks: what the write routes take, what a task and a listing answer, the
context and /health answers; the shared id and metadata fields."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from service.core.domain import (
    ID_PATTERN,
    MAX_BATCH_MEMORIES,
    MAX_MESSAGES,
    MAX_METADATA_KEYS,
    Memory,
    Message,
    Scope,
)
from service.core.sensitivity import Sensitivity
from service.schemas.health import LLMHealth

OptionalId = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)


MAX_METADATA_KEY_CHARS = 64
TOO_LARGE = "too_large"  # the error type the API answers 413 (service/api/errors.py)


MAX_METADATA_VALUE_CHARS = 2000  # one value, as JSON


MAX_THREAD_POSITION = 10_000_000  # a raw memory's place in its thread (RawMemoryItem.position)


MAX_METADATA_DEPTH = 3  # {"a": {"b": {"c": 1}}} is depth 3


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_depth(v) for v in value), default=0)
    return 0


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Bounds of `metadata` (number of keys is the field's max_length): key length, the JSON size of each
    value, nesting depth. The error names the limit; a size over its limit is 413 like every size limit (the
    `too_large` error type, service/api/errors.py)."""
    for key, item in value.items():
        if len(key) > MAX_METADATA_KEY_CHARS:
            raise PydanticCustomError(TOO_LARGE, "metadata key '{key}...' is longer than {limit} characters",
                                      {"key": key[:20], "limit": MAX_METADATA_KEY_CHARS})
        if len(json.dumps(item, default=str)) > MAX_METADATA_VALUE_CHARS:
            raise PydanticCustomError(TOO_LARGE, "metadata value of '{key}' is over {limit} characters as JSON",
                                      {"key": key, "limit": MAX_METADATA_VALUE_CHARS})
    if _depth(value) > MAX_METADATA_DEPTH:
        raise ValueError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    return value


RequestMetadata = Annotated[dict[str, Any], AfterValidator(check_metadata)]


TenantId = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                 description="The user the request acts for. With a user API key it may be omitted (the key's "
                             "user); naming another user is 403. Required with an admin key or AUTH_MODE=none.")


MaxSensitivity = Field(
    default=None, description="Lower this read's sensitivity ceiling (public < internal < private < secret): it "
                              "returns no memory above it, nor a fact only such memories support. It never raises "
                              "the API key's own ceiling (`max_sensitivity` of the key).")


class RawMemoryItem(BaseModel):
    """One pre-categorised fact; a batch names its user once."""

    model_config = ConfigDict(extra="forbid")

    # Length is checked in the service (400 empty / 413 over MAX_CONTENT_CHARS), not here.
    content: str
    category: str = Field(min_length=1, max_length=64)
    scope: Scope | None = None
    project_id: str | None = OptionalId
    agent_id: str | None = OptionalId
    metadata: RequestMetadata = Field(default_factory=dict, max_length=MAX_METADATA_KEYS)
    occurred_at: datetime | None = Field(
        default=None, description="When what it says happened (ISO 8601; without a zone, UTC). Default: now.")
    kind: str | None = Field(
        default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
        description="A preference's kind (e.g. `budget`); a newer preference of the same kind, scope and "
                    "applies_to supersedes the older one. Only with category `preference`.")
    applies_to: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=20,
        description="Entity names the preference applies to (a project's tool, a person); part of its scope.")
    sensitivity: Sensitivity | None = Field(
        default=None, description="Its tier: public, internal, private or secret. Default: the category's "
                                  "(private for personal_fact), else internal. A read whose ceiling is lower "
                                  "never returns it.")
    thread_id: str | None = Field(
        default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
        description="The conversation or transcript this memory is one message of, with `position`: kept with the "
                    "memory and in the export.")
    position: int | None = Field(
        default=None, ge=0, le=MAX_THREAD_POSITION,
        description="This memory's place in its thread (0-based), with `thread_id`.")

    @model_validator(mode="after")
    def _thread_and_position(self) -> RawMemoryItem:
        if (self.thread_id is None) != (self.position is None):
            raise ValueError("thread_id and position go together: give both or neither")
        return self


class RawMemoryRequest(RawMemoryItem):
    user_id: str | None = TenantId


class RawBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = TenantId
    memories: list[RawMemoryItem] = Field(
        min_length=1, max_length=MAX_BATCH_MEMORIES,
        description=f"1-{MAX_BATCH_MEMORIES} facts of this user, stored by one task; an item that repeats an "
                    "earlier one of the batch is stored once")


class ConversationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    user_id: str | None = TenantId
    project_id: str | None = OptionalId
    agent_id: str | None = OptionalId
    metadata: RequestMetadata = Field(default_factory=dict, max_length=MAX_METADATA_KEYS)
    session_id: str | None = OptionalId  # the conversation the messages join (GET /v1/conversations/{id})


class AcceptedResponse(BaseModel):
    status: Literal["accepted"] = "accepted"
    task_id: str
    poll_url: str


class MemoryRecord(BaseModel):
    """A memory as the read routes return it."""

    id: str
    user_id: str
    content: str
    category: str
    scope: Scope
    project_id: str | None
    agent_id: str | None
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    occurred_at: str | None = None
    source_message_ids: list[str] = Field(default_factory=list)
    kind: str | None = None  # a preference's kind and scope, and what superseded it (docs/preferences.md)
    applies_to: list[str] = Field(default_factory=list)
    superseded_by: str | None = None
    superseded_at: str | None = None
    sensitivity: Sensitivity = Sensitivity.INTERNAL

    @classmethod
    def of(cls, m: Memory) -> MemoryRecord:
        return cls.model_validate(m.model_dump(exclude={"hash", "task_id"}))


class MemoryPage(BaseModel):
    status: Literal["ok"] = "ok"
    memories: list[MemoryRecord]
    next_cursor: str | None


class UpdateMemoryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str
    category: str | None = Field(default=None, min_length=1, max_length=64)
    user_id: str | None = OptionalId


class BulkDeleteRequest(BaseModel):
    """Delete by ids, or by filter. A filter needs at least one field besides user_id, or all=true."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = TenantId
    memory_ids: list[str] | None = Field(default=None, min_length=1, max_length=1000)
    scope: Scope | None = None
    category: str | None = Field(default=None, min_length=1, max_length=64)
    project_id: str | None = OptionalId
    agent_id: str | None = OptionalId
    all: bool = False


class ContextGroup(BaseModel):
    category: str
    group: str
    memories: list[MemoryRecord]


class ContextSection(BaseModel):
    """A part of the context beside the memories (e.g. lessons from earlier sessions), one line per item; it
    shares the token budget with them (service/search/context.py)."""

    title: str
    lines: list[str]


class ContextResponse(BaseModel):
    status: Literal["ok"] = "ok"
    user_id: str
    project_id: str | None
    categories: list[ContextGroup]
    total: int
    order: list[str] = Field(default_factory=list, description=(
        "The listed memories' ids, most useful first (query hits, facts before windows, the project's before "
        "global ones, then recent and often retrieved); `categories` groups them for reading."))
    restated: int = Field(default=0, description=(
        "Memories not listed because a listed one says the same: a window a listed fact came from, or the "
        "same text again."))
    omitted: int = Field(default=0, description="Memories left out to fit `max_tokens` (or the per-category cap).")
    unrelated: int = Field(default=0, description=(
        "With `query`: the memories left out as unrelated to it (not found, or below the relevance floor). A "
        "context with a query lists only what the query finds; none is a good answer."))
    max_tokens: int | None = None
    tokens: int | None = Field(default=None, description=(
        "With max_tokens: the tokens of the markdown form, counted by `tokenizer` (the embedder's)."))
    tokenizer: str | None = None
    sections: list[ContextSection] = Field(default_factory=list)
    history: dict[str, list[MemoryRecord]] = Field(default_factory=dict, description=(
        "For a listed memory that replaced others (a correction, a new value of a preference): the values it "
        "replaced, oldest first, at most HISTORY_KEPT. The markdown form shows them on the memory's line, dated, "
        "the current value marked."))


class CategoryOut(BaseModel):
    name: str
    group: str
    default_scope: str
    description: str


class WritePathHealth(BaseModel):
    """The write path's backlog: outbox intents not yet in both stores, tasks not ended, and the graph
    transactions re-run on a transient error (deadlocks) by this process since it started."""

    outbox_depth: int | None = None
    outbox_oldest_age_s: float | None = None
    pending_tasks: int | None = None
    graph_transient_retries: int = 0
    deadlock_retries: int = 0
    oldest_task_age_s: float | None = None  # the oldest task not ended (QUEUE_AGE_DEGRADED_SECONDS)
    # Each API and worker process's event loop: lag that stayed high (`lag_s`), the worst lately and since start,
    # its jobs in flight and their peak (service/core/loop.py).
    loops: list[dict[str, Any]] = Field(default_factory=list)


class HealthResponse(BaseModel):
    status: Literal["ok", "degraded"]
    down: list[str] = Field(default_factory=list)  # the dependencies that are down (503); slow alone answers 200
    service: str
    profile: str
    checks: dict[str, str]
    embedder: str
    extractor: str
    llm: LLMHealth | None = None
    write_path: WritePathHealth = Field(default_factory=WritePathHealth)
    errors: dict[str, str] | None = None  # why a check is down: admin keys only
