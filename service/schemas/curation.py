"""Models of entity curation and retrieval traces: duplicate pairs, merges and reviews, graph statistics,
traces."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.memories import TenantId


class EntityCard(BaseModel):
    id: str
    name: str
    type: str | None = None
    aliases: list[str] = Field(default_factory=list)
    roles: list[str] | None = None  # what its memories say it is ("plumber"): docs/identity.md, Meanings
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
