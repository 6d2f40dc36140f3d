"""Search and the session context: the hybrid search (service/search/, docs/retrieval.md) with its retrieval
trace when asked for, the context block built from the user's memories, and the start-up warm-up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

import structlog

from service.ai.tokens import TokenCounter
from service.core.errors import DependencyUnavailable
from service.memory.currency import newer_first, successors_first
from service.memory.rules import StoredMemories, scroll_all
from service.schemas.memories import ContextResponse, ContextSection
from service.schemas.search import SearchRequest, SearchResponse
from service.search import context
from service.stores.graph import RetiredFacts, groups_for
from service.stores.vector import MemoryFilter

log = structlog.get_logger(__name__)

CONTEXT_QUERY_HITS = 20  # with a query, the context lists its first search hits first


class Finder(Protocol):
    """The fused search (service/search/searcher.py `Searcher`)."""

    async def search(self, req: SearchRequest, user_id: str) -> SearchResponse: ...


class UsageCounts(Protocol):
    """How often search returned each memory (service/search/usage.py `RetrievalCounts`)."""

    def count(self, user_id: str, memory_ids: list[str]) -> None: ...

    async def counts(self, user_id: str) -> dict[str, int]: ...


class SearchTraces(Protocol):
    """Records a search's retrieval trace (service/memory/traces.py `Traces`)."""

    def trace_search(self, req: SearchRequest, user_id: str, response: SearchResponse) -> str | None: ...


class MemorySearch:
    def __init__(self, searcher: Finder, vectors: StoredMemories, traces: SearchTraces, tokens: TokenCounter,
                 recency_days: float, usage: UsageCounts | None = None, *, retired: RetiredFacts | None = None,
                 graph_timeout_s: float = 5.0) -> None:
        self.searcher = searcher
        self.retired = retired  # the graph's retired facts (the current-first pass's second witness)
        self.graph_timeout_s = graph_timeout_s
        self.vectors = vectors  # the context's memories
        self.traces = traces
        self.tokens = tokens  # the context's budget, in the query embedder's tokens
        self.recency_days = recency_days  # CONTEXT_RECENCY_DAYS: the context's recency scale
        self.usage = usage  # how often search returned each memory (the context's order)

    async def search(self, req: SearchRequest, user_id: str) -> SearchResponse:
        """Hybrid search (service/search/, docs/retrieval.md), with its retrieval trace when asked for."""
        response = await self.searcher.search(req, user_id)
        if req.retrievers is None:  # the default search: the current value first (service/memory/currency.py)
            response.results = newer_first(response.results, req.query)
            response.results = successors_first(response.results, await self._retired(user_id, req, response))
        if self.usage is not None:
            self.usage.count(user_id, [r.id for r in response.results])
        if req.trace:
            response.trace_id = self.traces.trace_search(req, user_id, response)
        return response

    async def _retired(self, user_id: str, req: SearchRequest, response: SearchResponse) -> dict[str, set[str]]:
        if self.retired is None or len(response.results) < 2:
            return {}
        try:
            async with asyncio.timeout(self.graph_timeout_s):
                return await self.retired.retired_by(user_id, groups_for(req.project_id),
                                                     [r.id for r in response.results])
        except (DependencyUnavailable, TimeoutError) as exc:
            log.warning("search_retired_facts_degraded", error=str(exc) or "timeout")
            return {}

    async def context(self, user_id: str, project_id: str | None, per_category: int = 200, *,
                      max_tokens: int | None = None, query: str | None = None,
                      sections: Sequence[ContextSection] = ()) -> ContextResponse:
        """The user's global memories plus the project's, most useful for the session first, restatements left
        out, within `max_tokens` of the markdown form when given (service/search/context.py); with `query`, its
        search hits above the relevance floor only (`unrelated` counts the others); `sections` (e.g. lessons from
        earlier sessions) share the budget."""
        everything = await scroll_all(self.vectors, MemoryFilter(user_id=user_id, project_id=project_id))
        memories = [m for m in everything if not m.superseded_by]  # the replaced values only as dated history
        hits: list[str] = []
        unrelated = 0
        if query is not None:  # a context with a query is what the query finds above the relevance floor
            found = await self.searcher.search(SearchRequest(query=query, project_id=project_id,
                                                             limit=CONTEXT_QUERY_HITS), user_id) if memories else None
            hits = [mid for r in (found.results if found else []) if not r.below_floor
                    for mid in (r.id, *(f.id for f in r.also))]
            related = [m for m in memories if m.id in set(hits)]
            unrelated = len(memories) - len(related)
            memories = related
        counts = await self.usage.counts(user_id) if self.usage is not None else {}
        ranked = context.rank(memories, project_id, hits, counts, datetime.now(UTC), self.recency_days)
        built = context.build(user_id, project_id, ranked, per_category=per_category, total=len(memories) + unrelated,
                              max_tokens=max_tokens, counter=self.tokens,
                              sections=list(sections), past=context.histories(everything))
        built.unrelated = unrelated
        return built

    async def warm_up(self) -> None:
        """Run the search once before the first request: Neo4j plans a statement on its first run (the graph
        retriever's is long) and dateparser loads its data on its first parse; searches arriving together on a
        fresh service would each wait for both, past GRAPH_TIMEOUT_SECONDS under a write load (degraded answers).
        It searches for a user id that API keys cannot name
        (`_warm-up`: ids start with a letter or digit), so no tenant's data is read; a failure is logged,
        never fatal (the stores were checked at start-up)."""
        t0 = time.perf_counter()
        try:
            for query in ("What did Warm Up plan the week before the concert?", "the"):
                await self.searcher.search(SearchRequest(query=query, limit=1), "_warm-up")
        except Exception as exc:  # a warm-up only: the next search reports for real
            log.warning("search_warm_up_failed", error=str(exc) or type(exc).__name__)
            return
        log.info("search_warmed", ms=round((time.perf_counter() - t0) * 1000, 1))
