"""The operations the API, the MCP server and the worker share.

API side: validate, enqueue, read. Worker side: embed, write both stores.
"""

from __future__ import annotations

from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.domain import (
    AcceptedResponse,
    Memory,
    MemoryOut,
    RawMemoryRequest,
    Scope,
    SearchRequest,
    SearchResponse,
    SearchResult,
    check_category,
    content_hash,
    memory_id_for,
    normalise,
    resolve_scope,
)
from service.errors import DomainError, PayloadTooLarge
from service.queue import TaskQueue
from service.settings import Settings
from service.stores.graph import GraphStore
from service.stores.vector import MemoryFilter, VectorStore

log = structlog.get_logger(__name__)


class MemoryService:
    def __init__(
        self,
        settings: Settings,
        tasks: TaskQueue,
        vectors: VectorStore,
        graph: GraphStore,
        embedder: Embedder,
    ) -> None:
        self.settings = settings
        self.tasks = tasks
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder

    # ------------------------------------------------------------------ validation

    def check_content(self, content: str) -> str:
        if not content.strip():
            raise DomainError("content is empty")
        limit = self.settings.max_content_chars
        if len(content) > limit:
            raise PayloadTooLarge(f"content has {len(content)} characters; the limit is {limit} (MAX_CONTENT_CHARS)")
        return content

    # ------------------------------------------------------------------ writes (API side)

    async def submit_raw(self, req: RawMemoryRequest) -> AcceptedResponse:
        self.check_content(req.content)
        scope = resolve_scope(req.category, req.scope, req.project_id)
        project_id = req.project_id if scope is Scope.PROJECT else None
        identity = {
            "user_id": req.user_id,
            "scope": scope.value,
            "project_id": project_id,
            "category": req.category,
            "content": normalise(req.content),
        }
        payload = {
            "user_id": req.user_id,
            "scope": scope.value,
            "project_id": project_id,
            "category": req.category,
            "content": req.content,
            "agent_id": req.agent_id,
            "metadata": req.metadata,
        }
        task_id = await self.tasks.enqueue("raw", identity, payload)
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}")

    # ------------------------------------------------------------------ writes (worker side)

    async def store_raw(self, task_id: str, job: dict[str, Any]) -> dict[str, Any]:
        """Embed and write one memory to both stores. Ids and timestamps come from the job,
        so a replay writes the very same point and node."""
        memory = Memory(
            id=memory_id_for(task_id, 0),
            user_id=job["user_id"],
            content=job["content"],
            category=job["category"],
            scope=Scope(job["scope"]),
            project_id=job.get("project_id"),
            agent_id=job.get("agent_id"),
            hash=content_hash(job["content"]),
            metadata=job.get("metadata") or {},
            created_at=job["accepted_at"],
            updated_at=job["accepted_at"],
            task_id=task_id,
        )
        await self.write_memories([memory])
        return {"memories": [MemoryOut.of(memory).model_dump(mode="json")]}

    async def write_memories(self, memories: list[Memory]) -> None:
        vectors = await self.embedder.embed([m.content for m in memories])
        await self.vectors.upsert(memories, vectors)
        await self.graph.upsert_memories(memories)
        log.info("memories_written", count=len(memories), ids=[m.id for m in memories])

    # ------------------------------------------------------------------ reads

    async def search(self, req: SearchRequest) -> SearchResponse:
        categories = tuple(check_category(c).name for c in req.categories) if req.categories else None
        [vector] = await self.embedder.embed([req.query])
        flt = MemoryFilter(user_id=req.user_id, project_id=req.project_id, categories=categories)
        hits = await self.vectors.search(vector, flt, req.limit)
        results = [
            SearchResult(
                id=h.memory.id,
                content=h.memory.content,
                score=h.score,
                source="vector",
                category=h.memory.category,
                scope=h.memory.scope,
                project_id=h.memory.project_id,
                created_at=h.memory.created_at,
                agent_id=h.memory.agent_id,
                metadata=h.memory.metadata,
            )
            for h in hits
        ]
        return SearchResponse(results=results)
