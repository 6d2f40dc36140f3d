"""Reads: a memory, a task's status, listings, context, merged search and graph search and listings."""

from __future__ import annotations

import asyncio
import itertools
from typing import TypeVar

import structlog

from service.domain import CATEGORIES, Memory, check_category, normalise
from service.errors import DependencyUnavailable
from service.memory.base import MemoryBase
from service.memory.mapping import fact_out, graph_result, vector_result
from service.metrics import OUTBOX_DEPTH, QUEUE_DEPTH, QUEUE_OLDEST, SEARCH_DURATION, timed
from service.schemas import (
    ContextGroup,
    ContextResponse,
    GraphSearchRequest,
    GraphSearchResponse,
    MemoryPage,
    MemoryRecord,
    SearchRequest,
    SearchResponse,
    SearchResult,
    TaskResponse,
    WritePathHealth,
)
from service.stores.graph import (
    GraphFact,
    Page,
    groups_for,
)
from service.stores.vector import MemoryFilter, ScoredMemory

log = structlog.get_logger(__name__)
_T = TypeVar("_T")



class MemoryReads(MemoryBase):
    async def get_memory(self, memory_id: str, user_id: str | None) -> MemoryRecord:
        [memory] = await self._existing([memory_id], user_id)
        return MemoryRecord.of(memory)


    async def task_status(self, task_id: str, owner: str | None) -> TaskResponse:
        """A task's status; a task of another user than `owner` (when given) is unknown (404)."""
        return await self.tasks.status(task_id, owner)


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
    ) -> MemoryPage:
        flt = self._list_filter(user_id, scope, category, project_id, agent_id, all_scopes=True)
        page, next_cursor = await self.vectors.scroll(flt, limit, cursor)
        return MemoryPage(memories=[MemoryRecord.of(m) for m in page], next_cursor=next_cursor)

    async def context(self, user_id: str, project_id: str | None, per_category: int = 200) -> ContextResponse:
        """The user's global memories plus the project's, grouped by category (in the order of CATEGORIES),
        oldest first within a category."""
        flt = MemoryFilter(user_id=user_id, project_id=project_id)
        memories: list[Memory] = []
        cursor: str | None = None
        for _ in range(100):  # bounded: 100 pages of 500
            page, cursor = await self.vectors.scroll(flt, 500, cursor)
            memories += page
            if cursor is None:
                break
        groups: dict[str, list[Memory]] = {}
        for m in memories:
            groups.setdefault(m.category, []).append(m)
        ordered = [
            ContextGroup(
                category=name,
                group=CATEGORIES[name].group,
                memories=[MemoryRecord.of(m) for m in sorted(groups[name], key=lambda m: (m.created_at, m.id))][
                    :per_category
                ],
            )
            for name in CATEGORIES
            if name in groups
        ]
        return ContextResponse(user_id=user_id, project_id=project_id, categories=ordered, total=len(memories))


    # ------------------------------------------------------------------ reads

    async def search(self, req: SearchRequest, user_id: str) -> SearchResponse:
        """Vector memories and graph facts in one list.

        Order (seed 001): vector-1, graph-1, vector-2, graph-2, ...; when one list runs out the
        other continues; at most `limit` results. Graph facts that a returned vector memory
        already states (it supports them, or the texts are equal) are removed. If the graph is
        down or slower than GRAPH_TIMEOUT_SECONDS the vector results come back with
        degraded=["graph"]. `categories` filters the vector memories; graph facts have none.
        """
        categories = tuple(check_category(c).name for c in req.categories) if req.categories else None
        flt = MemoryFilter(user_id=user_id, project_id=req.project_id, categories=categories)

        async def vector_half() -> list[ScoredMemory]:
            with timed(SEARCH_DURATION, retriever="vector"):
                [vector] = await self.embedder.embed([req.query])
                return await self.vectors.search(vector, flt, req.limit)

        async def graph_half() -> tuple[list[GraphFact], list[str]]:
            with timed(SEARCH_DURATION, retriever="graph"):
                return await self._graph_facts(user_id, req.project_id, req.query, req.limit)

        # the graph half starts at once, beside the query's embedding
        with timed(SEARCH_DURATION, retriever="merged"):
            hits, (facts, degraded) = await asyncio.gather(vector_half(), graph_half())
        facts = await self._live_facts(user_id, facts)
        vector_results = [vector_result(h) for h in hits]
        shown_ids = {h.memory.id for h in hits}
        shown_text = {normalise(h.memory.content) for h in hits}
        graph_results = [
            graph_result(f)
            for f in facts
            if not shown_ids.intersection(f.memory_ids) and normalise(f.fact) not in shown_text
        ]
        merged: list[SearchResult] = []
        for pair in itertools.zip_longest(vector_results, graph_results):
            merged += [r for r in pair if r is not None]
        return SearchResponse(results=merged[: req.limit], degraded=degraded)

    async def _live_facts(self, user_id: str, facts: list[GraphFact]) -> list[GraphFact]:
        """Facts with at least one supporting memory the vector store still holds: the facts of a
        memory whose delete has not reached the graph yet are never returned."""
        ids = sorted({mid for f in facts for mid in f.memory_ids})
        if not ids:
            return facts
        live = {m.id for m in await self.vectors.get(ids) if m.user_id == user_id}
        return [f for f in facts if live.intersection(f.memory_ids)]

    async def _graph_facts(
        self, user_id: str, project_id: str | None, query: str, limit: int, include_history: bool = False
    ) -> tuple[list[GraphFact], list[str]]:
        try:
            async with asyncio.timeout(self.settings.graph_timeout_seconds):
                facts = await self.graph.search_facts(user_id, groups_for(project_id), query, limit, include_history)
            return facts, []
        except (DependencyUnavailable, TimeoutError) as exc:
            log.warning("graph_search_degraded", error=str(exc) or "timeout")
            return [], ["graph"]


    async def graph_search(self, req: GraphSearchRequest, user_id: str) -> GraphSearchResponse:
        """Graph facts only; unlike /v1/search a graph outage is an error (503), not a degradation."""
        facts = await self.graph.search_facts(
            user_id, groups_for(req.project_id), req.query, req.limit, req.include_history
        )
        return GraphSearchResponse(results=[fact_out(f) for f in facts])


    async def list_nodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> Page:
        return await self.graph.list_nodes(user_id, groups_for(project_id) if project_id else None, limit, cursor)

    async def list_edges(
        self, user_id: str, project_id: str | None, limit: int, cursor: str | None, include_history: bool
    ) -> Page:
        groups = groups_for(project_id) if project_id else None
        return await self.graph.list_edges(user_id, groups, limit, cursor, include_history)

    async def list_episodes(self, user_id: str, project_id: str | None, limit: int, cursor: str | None) -> Page:
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
        stats = await self.tasks.stats()
        return WritePathHealth(
            outbox_depth=depth, outbox_oldest_age_s=oldest, pending_tasks=await self.tasks.pending_count(),
            graph_transient_retries=stats.get("graph_transient_retries", 0),
            deadlock_retries=stats.get("deadlock_retries", 0),
        )
