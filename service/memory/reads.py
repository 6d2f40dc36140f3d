"""Reads: a memory, a task's status, listings, context, merged search and graph search and listings."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import structlog

from service.core.metrics import OUTBOX_DEPTH, QUEUE_DEPTH, QUEUE_OLDEST
from service.core.sensitivity import redact
from service.memory.curation import MemoryCuration
from service.memory.mapping import fact_out
from service.memory.rules import existing, list_filter, scroll_all
from service.schemas import (
    ContextResponse,
    GraphSearchRequest,
    GraphSearchResponse,
    MemoryPage,
    MemoryRecord,
    SearchRequest,
    SearchResponse,
    TaskResponse,
    WritePathHealth,
)
from service.schemas.graph_api import community_item
from service.schemas.memories import ContextSection
from service.search import context
from service.stores.graph import RowPage, groups_for
from service.stores.vector import MemoryFilter

log = structlog.get_logger(__name__)
GRAPH_SEARCH_COMMUNITIES = 3  # communities a graph search returns at most

CONTEXT_QUERY_HITS = 20  # with a query, the context lists its first search hits first


class MemoryReads(MemoryCuration):
    async def get_memory(self, memory_id: str, user_id: str | None) -> MemoryRecord:
        [memory] = await existing(self.vectors, [memory_id], user_id)
        return MemoryRecord.of(memory)


    async def task_status(self, task_id: str, owner: str | None) -> TaskResponse:
        """A task's status; a task of another user than `owner` (when given) is unknown (404)."""
        status = await self.tasks.status(task_id, owner)
        # A write's result lists its memories and what the graph made of them: when one is above the caller's
        # sensitivity ceiling, only the memories within it are told (the entities and facts may be its words).
        kept = redact(status.result)
        if kept == status.result:
            return status
        memories = (kept or {}).get("memories") or []
        return status.model_copy(update={"result": {"memories": memories, "redacted": True}})


    async def list_memories(
        self,
        user_id: str,
        *,
        scope: str | None = None,
        category: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        include_superseded: bool = False,
    ) -> MemoryPage:
        flt = list_filter(user_id, scope, category, project_id, agent_id, all_scopes=True)
        if not include_superseded:  # superseded preferences are history (service/memory/preferences.py)
            flt = replace(flt, active_only=True)
        page, next_cursor = await self.vectors.scroll(flt, limit, cursor)
        return MemoryPage(memories=[MemoryRecord.of(m) for m in page], next_cursor=next_cursor)

    async def context(self, user_id: str, project_id: str | None, per_category: int = 200, *,
                      max_tokens: int | None = None, query: str | None = None,
                      sections: Sequence[ContextSection] = ()) -> ContextResponse:
        """The user's global memories plus the project's, most useful for the session first, restatements left
        out, within `max_tokens` of the markdown form when given (service/search/context.py); with `query`, its
        search hits first; `sections` (e.g. lessons from earlier sessions) share the budget."""
        flt = MemoryFilter(user_id=user_id, project_id=project_id, active_only=True)
        memories = await scroll_all(self.vectors, flt)
        hits: list[str] = []
        if query and memories:
            found = await self.searcher.search(SearchRequest(query=query, project_id=project_id,
                                                             limit=CONTEXT_QUERY_HITS), user_id)
            hits = [mid for r in found.results for mid in (r.id, *(f.id for f in r.also))]
        counts = await self.usage.counts(user_id) if self.usage is not None else {}
        ranked = context.rank(memories, project_id, hits, counts, datetime.now(UTC),
                              self.settings.context_recency_days)
        return context.build(user_id, project_id, ranked, per_category=per_category, total=len(memories),
                             max_tokens=max_tokens, counter=self.tokens,
                             sections=list(sections))

    # ------------------------------------------------------------------ reads

    async def search(self, req: SearchRequest, user_id: str) -> SearchResponse:
        """Hybrid search (service/search/, docs/retrieval.md), with its retrieval trace when asked for."""
        response = await self.searcher.search(req, user_id)
        if self.usage is not None:
            self.usage.count(user_id, [r.id for r in response.results])
        if req.trace:
            response.trace_id = self.trace_search(req, user_id, response)
        return response

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

    async def graph_search(self, req: GraphSearchRequest, user_id: str) -> GraphSearchResponse:
        """Graph facts only; unlike /v1/search a graph outage is an error (503), not a degradation."""
        facts = await self.graph.search_facts(
            user_id, groups_for(req.project_id), req.query, req.limit, req.include_history
        )
        named = await self.graph.query_entities(user_id, groups_for(req.project_id), req.query)
        communities = await self.graph.communities_of(user_id, named, GRAPH_SEARCH_COMMUNITIES) if named else []
        return GraphSearchResponse(results=[fact_out(f) for f in facts],
                                   communities=[community_item(c) for c in communities])


    async def list_nodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> RowPage:
        return await self.graph.list_nodes(user_id, groups_for(project_id) if project_id else None, limit, cursor)

    async def list_edges(
        self, user_id: str, project_id: str | None, limit: int, cursor: str | None, include_history: bool
    ) -> RowPage:
        groups = groups_for(project_id) if project_id else None
        return await self.graph.list_edges(user_id, groups, limit, cursor, include_history)

    async def list_episodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> RowPage:
        return await self.graph.list_episodes(user_id, groups_for(project_id) if project_id else None, limit, cursor)

    async def refresh_gauges(self) -> None:
        """Queue, task and outbox gauges, read from Redis when /metrics is scraped."""
        depth, _ = await self.outbox.stats()
        OUTBOX_DEPTH.set(depth)
        QUEUE_DEPTH.set(await self.tasks.queued_jobs())
        QUEUE_OLDEST.set(await self.tasks.oldest_pending_age_s())

    async def write_path_stats(self) -> WritePathHealth:
        """The write path's backlog for /health (Redis must be up)."""
        depth, oldest = await self.outbox.stats()
        stats = await self.kv.stats()
        return WritePathHealth(
            outbox_depth=depth, outbox_oldest_age_s=oldest, pending_tasks=await self.tasks.pending_count(),
            graph_transient_retries=stats.get("graph_transient_retries", 0),
            deadlock_retries=stats.get("deadlock_retries", 0),
        )
