"""Models of search: the merged search, the graph search and the graph listings."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.core.domain import (
    ID_PATTERN,
    Scope,
    utc,
)
from service.core.sensitivity import Sensitivity
from service.schemas.graph_api import CommunityItem
from service.schemas.memories import MaxSensitivity, OptionalId, TenantId
from service.text.timephrases import TimeWindow


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000)
    user_id: str | None = TenantId
    max_sensitivity: Sensitivity | None = MaxSensitivity
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
    include: list[Literal["traces", "messages", "entities", "facts"]] | None = Field(
        default=None, max_length=4, description=(
            'With "traces": `reasoning` lists prior task runs that match the query or touched the returned '
            "memories' entities; \"messages\": `messages`, hits among the conversation tier's messages (the "
            "`session_id` session's first); \"entities\": `entities`, the entities the query names with their "
            "score and related names (docs/runs.md); \"facts\": `facts`, the graph facts that support the "
            "returned memories, each with its entities and validity times, once each (docs/retrieval.md)."))
    session_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN, description=(
        'The current session: with include "messages" its messages come first.'))
    collapse: bool = Field(default=True, description=(
        "Fold a result whose source messages are covered by another result's (a fact and the window it came "
        "from) into the one that keeps the slot, listed in its `also`; false returns every memory on its own."))
    include_superseded: bool = Field(default=False, description=(
        "Also return memories a later one superseded (a corrected value, a replaced preference), each with its "
        "`superseded_by`: the history. Default: only what is current."))

    @model_validator(mode="after")
    def _window(self) -> SearchRequest:
        if self.after is not None and self.before is not None and utc(self.after) >= utc(self.before):
            raise ValueError("'after' must be earlier than 'before'")
        return self


class Signal(BaseModel):
    """One list's vote for a result: its rank (1 = first) in that list and its own score. The retrievers (dense,
    lexical, graph, time): every list that set the order is named. `newer`: the last pass put this newer statement
    of a change just above an older result about the same thing (service/memory/currency.py); its rank is the place
    it took."""

    retriever: Literal["dense", "lexical", "graph", "time", "newer"]
    rank: int
    score: float


class Folded(BaseModel):
    """A memory folded into a result that covers its source messages (collapse): its id and what it is."""

    id: str
    kind: Literal["fact", "window", "memory"]


class SearchResult(BaseModel):
    id: str
    content: str
    score: float
    source: Literal["vector", "graph"] = Field(description=(
        "The kind of retriever that found it: `graph` when only the graph retriever did, else `vector` (the "
        "vector store's dense, lexical or time retrievers); `signals` is the detailed account."))
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
    also: list[Folded] = Field(default_factory=list, description=(
        "Memories folded into this one (collapse): their source messages are among this result's, so their "
        "content is said here; they take no slot of `limit`."))
    superseded_by: str | None = Field(default=None, description=(
        "The memory that replaced this one (only with `include_superseded`)."))
    event_at: str | None = Field(default=None, description=(
        "The day (YYYY-MM-DD) of the event the memory is about, when it names one other than the day it was said "
        "(\"dentist next Friday\" said on 4 December: 2026-12-11; \"we moved last weekend\": that Saturday)."))
    below_floor: bool = Field(default=False, description=(
        "Found only by meaning, and less like the query than the relevance floor (RELEVANCE_FLOOR, calibrated per "
        "embedding model): probably unrelated. Listed, never dropped, by search; recall and the context leave it "
        "out."))


class SearchWindow(BaseModel):
    """The time the query names, as the time retriever searched it (occurred_at in [start, end))."""

    phrase: str
    start: str
    end: str
    period: str

    @classmethod
    def of(cls, w: TimeWindow) -> SearchWindow:
        return cls(phrase=w.phrase, start=w.start.isoformat(), end=w.end.isoformat(), period=w.period)


class SupportingFact(BaseModel):
    """A graph fact (the v1 API's graph result) supporting returned memories: its entities and validity times."""

    id: str
    fact: str
    source_entity: str
    predicate: str
    target_entity: str
    valid_at: str | None
    invalid_at: str | None
    memory_ids: list[str] = Field(description="The returned memories it was found in (of this answer).")


class SearchResponse(BaseModel):
    status: Literal["ok"] = "ok"
    results: list[SearchResult]
    degraded: list[str] = Field(default_factory=list)
    time_window: SearchWindow | None = None
    trace_id: str | None = Field(default=None, description="With trace=true: GET /v1/traces/{trace_id}.")
    facts: list[SupportingFact] | None = Field(default=None, description=(
        'With include: ["facts"]: the valid graph facts that the returned memories support, once each.'))


class GraphSearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000)
    user_id: str | None = TenantId
    max_sensitivity: Sensitivity | None = MaxSensitivity
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
    communities: list[CommunityItem] = Field(
        default_factory=list, description="the entity communities the query's entities belong to (docs/graph.md)")


class GraphPage(BaseModel):
    status: Literal["ok"] = "ok"
    items: list[dict[str, Any]]
    next_cursor: str | None
