"""The API's request and response models (and the maintenance run reports). Domain rules are in
service/domain.py."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from service.domain import (
    ID_PATTERN,
    MAX_BATCH_MEMORIES,
    MAX_MESSAGES,
    MAX_METADATA_KEYS,
    Memory,
    Message,
    Scope,
    TaskStatus,
    utc,
)
from service.timephrases import TimeWindow


class MemoryOut(BaseModel):
    id: str
    content: str
    category: str
    scope: Scope
    project_id: str | None
    created_at: str
    occurred_at: str | None = None
    source_message_ids: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls(
            id=m.id,
            content=m.content,
            category=m.category,
            scope=m.scope,
            project_id=m.project_id,
            created_at=m.created_at,
            occurred_at=m.occurred_at,
            source_message_ids=list(m.source_message_ids),
        )


# --------------------------------------------------------------------------------------------
# Requests / responses
# --------------------------------------------------------------------------------------------

OptionalId = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 2000  # one value, as JSON
MAX_METADATA_DEPTH = 3  # {"a": {"b": {"c": 1}}} is depth 3


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_depth(v) for v in value), default=0)
    return 0


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Bounds of `metadata` (number of keys is the field's max_length): key length, the JSON size of each
    value, nesting depth. The error names the limit."""
    for key, item in value.items():
        if len(key) > MAX_METADATA_KEY_CHARS:
            raise ValueError(f"metadata key '{key[:20]}...' is longer than {MAX_METADATA_KEY_CHARS} characters")
        if len(json.dumps(item, default=str)) > MAX_METADATA_VALUE_CHARS:
            raise ValueError(f"metadata value of '{key}' is over {MAX_METADATA_VALUE_CHARS} characters as JSON")
    if _depth(value) > MAX_METADATA_DEPTH:
        raise ValueError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    return value


RequestMetadata = Annotated[dict[str, Any], AfterValidator(check_metadata)]
TenantId = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                 description="The user the request acts for. With a user API key it may be omitted (the key's "
                             "user); naming another user is 403. Required with an admin key or AUTH_MODE=none.")


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


class Progress(BaseModel):
    done: int
    total: int


class TaskResponse(BaseModel):
    task_id: str
    status: TaskStatus
    result: dict[str, Any] | None = None
    error: str | None = None
    progress: Progress | None = Field(default=None, description="While a long task (import, dedup, reconcile) "
                                                               "runs: how far it is")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000)
    user_id: str | None = TenantId
    project_id: str | None = OptionalId
    categories: list[str] | None = Field(default=None, max_length=13)
    limit: int = Field(default=10, ge=1, le=100)
    retrievers: list[Literal["dense", "lexical", "graph", "time"]] | None = Field(
        default=None, min_length=1, max_length=4,
        description="Which retrievers run (default: all). `time` runs when the query names a time.")
    after: datetime | None = Field(
        default=None, description="Only memories whose occurred_at is at or after this (ISO 8601; UTC without a zone).")
    before: datetime | None = Field(
        default=None, description="Only memories whose occurred_at is before this (ISO 8601; UTC without a zone).")

    trace: bool = Field(default=False, description=(
        "Record which memories this search returned and which entities the graph retriever used "
        "(GET /v1/traces/{trace_id}); kept TRACE_TTL_DAYS."))
    include: list[Literal["traces"]] | None = Field(default=None, max_length=1, description=(
        'With "traces": `reasoning` lists prior task runs that match the query or touched the returned '
        "memories' entities (docs/runs.md)."))

    @model_validator(mode="after")
    def _window(self) -> SearchRequest:
        if self.after is not None and self.before is not None and utc(self.after) >= utc(self.before):
            raise ValueError("'after' must be earlier than 'before'")
        return self


class Signal(BaseModel):
    """One retriever's vote for a result: its rank (1 = first) in that retriever's list and its own score."""

    retriever: Literal["dense", "lexical", "graph", "time"]
    rank: int
    score: float


class SearchResult(BaseModel):
    id: str
    content: str
    score: float
    source: Literal["vector", "graph"]
    category: str | None
    scope: Scope | None
    project_id: str | None
    created_at: str | None
    agent_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # graph results: the fact's entities and validity
    source_entity: str | None = None
    target_entity: str | None = None
    predicate: str | None = None
    valid_at: str | None = None
    invalid_at: str | None = None
    memory_ids: list[str] | None = None
    occurred_at: str | None = None
    source_message_ids: list[str] = Field(default_factory=list)
    signals: list[Signal] = Field(
        default_factory=list, description="Which retrievers returned it and at what rank; `score` is the fused "
                                          "score (reciprocal rank fusion, docs/retrieval.md).")


class SearchWindow(BaseModel):
    """The time the query names, as the time retriever searched it (occurred_at in [start, end))."""

    phrase: str
    start: str
    end: str
    period: str

    @classmethod
    def of(cls, w: TimeWindow) -> SearchWindow:
        return cls(phrase=w.phrase, start=w.start.isoformat(), end=w.end.isoformat(), period=w.period)


class SearchResponse(BaseModel):
    status: Literal["ok"] = "ok"
    results: list[SearchResult]
    degraded: list[str] = Field(default_factory=list)
    time_window: SearchWindow | None = None
    trace_id: str | None = Field(default=None, description="With trace=true: GET /v1/traces/{trace_id}.")


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


class GraphSearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000)
    user_id: str | None = TenantId
    project_id: str | None = OptionalId
    limit: int = Field(default=10, ge=1, le=100)
    include_history: bool = False


class GraphFactOut(BaseModel):
    id: str
    fact: str
    predicate: str
    source: str
    target: str
    scope: Scope
    project_id: str | None
    valid_at: str | None
    invalid_at: str | None
    expired_at: str | None
    memory_ids: list[str]
    score: float


class GraphSearchResponse(BaseModel):
    status: Literal["ok"] = "ok"
    results: list[GraphFactOut]


class EntityCard(BaseModel):
    id: str
    name: str
    type: str | None = None
    aliases: list[str] = Field(default_factory=list)
    group_id: str | None = None
    mentions: int = 0


class DuplicatePair(BaseModel):
    """A pair the resolution gate could not decide: `source` (the newer entity) may be `target`."""

    source: EntityCard
    target: EntityCard
    score: float
    match_type: str | None = None
    reason: str | None = None
    group_id: str | None = None
    created_at: str | None = None


class DuplicatePage(BaseModel):
    status: Literal["ok"] = "ok"
    items: list[DuplicatePair]
    next_cursor: str | None


class MergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = TenantId
    source_id: str = Field(min_length=1, max_length=128)
    target_id: str = Field(min_length=1, max_length=128)


class ReviewRequest(MergeRequest):
    confirm: bool = Field(description="true: merge source into target; false: they differ, never propose again")
    reviewer: str | None = Field(default=None, min_length=1, max_length=128)


class UnmergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = TenantId


class EntityChange(BaseModel):
    status: Literal["confirmed", "rejected", "merged", "unmerged"]
    source_id: str
    target_id: str
    merged_into: str | None = None


class SameAsCounts(BaseModel):
    pending: int
    confirmed: int
    rejected: int


class GraphStats(BaseModel):
    status: Literal["ok"] = "ok"
    memories: int
    entities: int
    merged_entities: int
    live_facts: int
    expired_facts: int = Field(description="Facts no longer current: invalidated or without support.")
    same_as: SameAsCounts
    traces: int


class TraceHit(BaseModel):
    memory_id: str
    rank: int
    score: float


class TraceEntity(BaseModel):
    entity_id: str
    name: str | None = None


class TraceSummary(BaseModel):
    id: str
    query: str
    at: str
    expires_at: str
    project_id: str | None = None


class TraceOut(TraceSummary):
    status: Literal["ok"] = "ok"
    user_id: str
    returned: list[TraceHit] = Field(default_factory=list)
    touched: list[TraceEntity] = Field(default_factory=list)


class TracePage(BaseModel):
    status: Literal["ok"] = "ok"
    items: list[TraceSummary]
    next_cursor: str | None


class GraphPage(BaseModel):
    status: Literal["ok"] = "ok"
    items: list[dict[str, Any]]
    next_cursor: str | None


class ContextGroup(BaseModel):
    category: str
    group: str
    memories: list[MemoryRecord]


class ContextResponse(BaseModel):
    status: Literal["ok"] = "ok"
    user_id: str
    project_id: str | None
    categories: list[ContextGroup]
    total: int


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


class HealthResponse(BaseModel):
    status: Literal["ok", "degraded"]
    service: str
    profile: str
    checks: dict[str, str]
    embedder: str
    extractor: str
    write_path: WritePathHealth = Field(default_factory=WritePathHealth)
    errors: dict[str, str] | None = None  # why a check is down: admin keys only


# --------------------------------------------------------------------------------------------
# Maintenance: dedup runs (worker/dedup.py, docs/dedup.md)
# --------------------------------------------------------------------------------------------


class DedupRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                                description="Only this user's memories; unset = every user")
    dry_run: bool = Field(default=False, description="Report what would be removed, remove nothing")


class DedupAccepted(AcceptedResponse):
    run_id: str
    run_url: str


class DedupGroup(BaseModel):
    """One duplicate group: `keep` is its newest memory, `remove` the others."""

    keep: str
    remove: list[str]


class DedupPhaseReport(BaseModel):
    scanned: int = 0  # memories the phase compared
    groups: int = 0  # duplicate groups found
    removed: int = 0  # memories removed (dry run: that would be removed)
    removed_ids: list[str] = Field(default_factory=list)
    group_details: list[DedupGroup] = Field(default_factory=list)
    skipped_changed: int = 0  # not removed: the memory or its survivor changed or vanished during the run
    graph_edges_expired: int = 0
    graph_expired_edge_ids: list[str] = Field(default_factory=list)
    truncated: bool = False  # id lists cut at the report bound (counts stay exact)
    errors: list[str] = Field(default_factory=list)


class DedupUserReport(BaseModel):
    user_id: str
    boundaries: int = 0  # scopes swept: global and each project
    skipped_recent: int = 0  # memories written after the run started (never touched by it)
    exact: DedupPhaseReport = Field(default_factory=DedupPhaseReport)
    near: DedupPhaseReport = Field(default_factory=DedupPhaseReport)
    errors: list[str] = Field(default_factory=list)


class DedupGraphRetry(BaseModel):
    """The graph part of earlier runs that had failed (kept pending in Redis), retried by this run."""

    pending_before: int = 0
    retried: int = 0
    graph_edges_expired: int = 0
    pending_after: int = 0
    errors: list[str] = Field(default_factory=list)


class DedupTotals(BaseModel):
    scanned: int = 0
    exact_groups: int = 0
    exact_removed: int = 0
    near_groups: int = 0
    near_removed: int = 0
    graph_edges_expired: int = 0
    errors: int = 0


DedupStatus = Literal["queued", "running", "completed", "partial", "skipped", "failed", "interrupted"]


class DedupRunSummary(BaseModel):
    """A maintenance run: a dedup sweep (`kind` "dedup") or a full reconcile ("reconcile", whose
    `repairs` counts each kind of repair; its threshold and dedup totals stay 0)."""

    run_id: str
    kind: Literal["dedup", "reconcile"] = "dedup"
    trigger: Literal["api", "cron", "manual"]
    status: DedupStatus
    dry_run: bool
    user_id: str | None = None
    task_id: str | None = None
    threshold: float = 0.0
    batch_size: int = 0
    repairs: dict[str, int] = Field(default_factory=dict)
    queued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    detail: str | None = None  # why skipped / partial / failed
    totals: DedupTotals = Field(default_factory=DedupTotals)
    progress: Progress | None = None  # while it runs: boundaries (dedup) or users (reconcile) done / total


class DedupRunReport(DedupRunSummary):
    graph_retry: DedupGraphRetry = Field(default_factory=DedupGraphRetry)
    users: list[DedupUserReport] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    # reconcile runs: repaired memory ids per user and kind of repair (at most 1,000 per kind)
    repaired_ids: dict[str, dict[str, list[str]]] = Field(default_factory=dict)


class OptimizeReport(BaseModel):
    status: Literal["ok"] = "ok"
    backend: str
    changed: bool
    backlog_before: int  # points outside the vector index before and after
    backlog_after: int
    figures: dict[str, Any] = Field(default_factory=dict)  # Qdrant Edge: build_seconds, swap_pause_ms, ...


class ReconcileRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                                description="Only this user's memories; unset = every user")
    dry_run: bool = Field(default=False, description="Report the drift, repair nothing")


class ReembedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN,
                                description="Only this user's memories; unset = every user (and, at the end, the "
                                            "vector store records the configured embedder as its own)")


class DedupRunList(BaseModel):
    status: Literal["ok"] = "ok"
    runs: list[DedupRunSummary]

