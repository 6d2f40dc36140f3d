"""Retrieval traces (docs/identity.md): a search's trace recorded in the background, read back by id or by the
entity it touched, and expired. The Cypher is in service/stores/neo4j/traces.py."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from service.core.domain import now_iso
from service.schemas.curation import TraceOut, TracePage, TraceSummary
from service.schemas.search import SearchRequest, SearchResponse
from service.stores.graph import GraphStore, groups_for

log = structlog.get_logger(__name__)

MAX_TRACE_WRITES = 64  # traces being written at once, per process; past it a search answers without one


class Traces:
    def __init__(self, graph: GraphStore, ttl_days: int, graph_timeout_s: float) -> None:
        self.graph = graph
        self.ttl_days = ttl_days  # a trace expires this long after its search (TRACE_TTL_DAYS)
        self.graph_timeout_s = graph_timeout_s  # GRAPH_TIMEOUT_SECONDS: a trace's write may take two
        self.trace_writes: set[asyncio.Task[None]] = set()  # traces being written (Deps.close lets them land)

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
            "at": at.isoformat(), "expires_at": (at + timedelta(days=self.ttl_days)).isoformat(),
            "returned": [{"memory_id": r.id, "rank": i, "score": r.score} for i, r in enumerate(response.results, 1)],
        }
        uses_graph = req.retrievers is None or "graph" in req.retrievers
        task = asyncio.create_task(self._write_trace(trace, req, uses_graph), name=f"trace-{trace['id']}")
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return str(trace["id"])

    async def _write_trace(self, trace: dict[str, Any], req: SearchRequest, uses_graph: bool) -> None:
        try:
            async with asyncio.timeout(self.graph_timeout_s * 2):
                touched = (await self.graph.reads.query_entities(str(trace["user_id"]), groups_for(req.project_id),
                                                           req.query) if uses_graph else [])
                await self.graph.traces.write_trace({**trace, "touched": touched})
        except Exception as exc:  # a lost trace must not take anything else down; it is logged
            log.warning("trace_write_failed", trace_id=trace["id"], error=f"{type(exc).__name__}: {exc}"[:300])

    async def get_trace(self, trace_id: str, user_id: str) -> TraceOut:
        return TraceOut(**await self.graph.traces.trace(user_id, trace_id, now_iso()))

    async def list_traces(self, user_id: str, entity_id: str | None, limit: int, cursor: str | None) -> TracePage:
        rows, next_cursor = await self.graph.traces.traces_of_entity(user_id, entity_id, limit, cursor, now_iso())
        return TracePage(items=[TraceSummary(**r) for r in rows], next_cursor=next_cursor)

    async def purge_traces(self) -> int:
        removed = await self.graph.traces.purge_traces(now_iso())
        if removed:
            log.info("traces_expired", removed=removed)
        return removed
