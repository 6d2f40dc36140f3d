"""Entity curation and provenance (docs/identity.md): the duplicate review queue, merges and unmerges,
graph statistics, and retrieval traces. The Cypher is in service/stores/neo4j/curation.py."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from service.memory.base import MemoryBase
from service.schemas import (
    DuplicatePage,
    DuplicatePair,
    EntityCard,
    EntityChange,
    GraphStats,
    MergeRequest,
    ReviewRequest,
    SameAsCounts,
    SearchRequest,
    SearchResponse,
    TraceOut,
    TracePage,
    TraceSummary,
)
from service.stores.graph import groups_for
from service.tasks.queue import now_iso

log = structlog.get_logger(__name__)

MAX_TRACE_WRITES = 64  # traces being written at once, per process; past it a search answers without one


class MemoryCuration(MemoryBase):

    async def list_duplicates(self, user_id: str, project_id: str | None, limit: int,
                              cursor: str | None) -> DuplicatePage:
        rows, next_cursor = await self.graph.list_duplicates(
            user_id, groups_for(project_id) if project_id else None, limit, cursor)
        items = [DuplicatePair(source=_card(r["source"]), target=_card(r["target"]),
                               **{k: r["pair"].get(k) for k in ("score", "match_type", "reason", "group_id",
                                                                 "created_at")})
                 for r in rows]
        return DuplicatePage(items=items, next_cursor=next_cursor)

    async def review_duplicate(self, req: ReviewRequest, user_id: str) -> EntityChange:
        change = await self.graph.review_duplicate(user_id, req.source_id, req.target_id, req.confirm,
                                                   req.reviewer or user_id, now_iso())
        log.info("duplicate_reviewed", user_id=user_id, **change)
        return EntityChange(**change)

    async def merge_entities(self, req: MergeRequest, user_id: str) -> EntityChange:
        change = await self.graph.merge_entities(user_id, req.source_id, req.target_id, now_iso())
        log.info("entities_merged", user_id=user_id, **change)
        return EntityChange(**change)

    async def unmerge_entity(self, entity_id: str, user_id: str) -> EntityChange:
        change = await self.graph.unmerge_entity(user_id, entity_id, now_iso())
        log.info("entity_unmerged", user_id=user_id, **change)
        return EntityChange(**change)

    async def graph_stats(self, user_id: str, project_id: str | None) -> GraphStats:
        s = await self.graph.graph_stats(user_id, groups_for(project_id) if project_id else None, now_iso())
        return GraphStats(memories=s["memories"], entities=s["entities"], merged_entities=s["merged"],
                          live_facts=s["live"], expired_facts=s["expired"], traces=s["traces"],
                          same_as=SameAsCounts(pending=s["pending"], confirmed=s["confirmed"],
                                               rejected=s["rejected"]))

    # ---- traces -----------------------------------------------------------------------------

    def trace_search(self, req: SearchRequest, user_id: str, response: SearchResponse) -> str | None:
        """Record the search in the background (the answer does not wait for it) and return the trace's id;
        None when MAX_TRACE_WRITES are already in flight (the search is not slowed to record it)."""
        tasks = self.trace_writes
        if len(tasks) >= MAX_TRACE_WRITES:
            log.warning("trace_skipped", reason="too many trace writes in flight", limit=MAX_TRACE_WRITES)
            return None
        at = datetime.now(UTC)
        trace: dict[str, Any] = {
            "id": str(uuid.uuid4()), "user_id": user_id, "query": req.query, "project_id": req.project_id,
            "at": at.isoformat(), "expires_at": (at + timedelta(days=self.settings.trace_ttl_days)).isoformat(),
            "returned": [{"memory_id": r.id, "rank": i, "score": r.score} for i, r in enumerate(response.results, 1)],
        }
        uses_graph = req.retrievers is None or "graph" in req.retrievers
        task = asyncio.create_task(self._write_trace(trace, req, uses_graph), name=f"trace-{trace['id']}")
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return str(trace["id"])

    async def _write_trace(self, trace: dict[str, Any], req: SearchRequest, uses_graph: bool) -> None:
        try:
            async with asyncio.timeout(self.settings.graph_timeout_seconds * 2):
                touched = (await self.graph.query_entities(str(trace["user_id"]), groups_for(req.project_id),
                                                           req.query) if uses_graph else [])
                await self.graph.write_trace({**trace, "touched": touched})
        except Exception as exc:  # a lost trace must not take anything else down; it is logged
            log.warning("trace_write_failed", trace_id=trace["id"], error=f"{type(exc).__name__}: {exc}"[:300])

    async def get_trace(self, trace_id: str, user_id: str) -> TraceOut:
        return TraceOut(**await self.graph.trace(user_id, trace_id, now_iso()))

    async def list_traces(self, user_id: str, entity_id: str | None, limit: int, cursor: str | None) -> TracePage:
        rows, next_cursor = await self.graph.traces_of_entity(user_id, entity_id, limit, cursor, now_iso())
        return TracePage(items=[TraceSummary(**r) for r in rows], next_cursor=next_cursor)

    async def purge_traces(self) -> int:
        removed = await self.graph.purge_traces(now_iso())
        if removed:
            log.info("traces_expired", removed=removed)
        return removed


def _card(row: dict[str, Any]) -> EntityCard:
    return EntityCard.model_validate({**row, "aliases": list(row.get("aliases") or [])})
