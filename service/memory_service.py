"""The operations the API, the MCP server and the worker share.

API side: validate, enqueue, read. Worker side: embed, write both stores.
"""

from __future__ import annotations

from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.ai.extraction import ExtractedFact, Extractor
from service.domain import (
    AcceptedResponse,
    ConversationRequest,
    Memory,
    MemoryOut,
    Message,
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
from service.stores.graph import EntityRef, GraphStore, MemoryLinks, RelationRef
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
        extractor: Extractor,
    ) -> None:
        self.settings = settings
        self.tasks = tasks
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder
        self.extractor = extractor

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

    async def submit_conversation(self, req: ConversationRequest) -> AcceptedResponse:
        total = sum(len(m.content) for m in req.messages)
        limit = self.settings.max_conversation_chars
        if total > limit:
            raise PayloadTooLarge(
                f"conversation has {total} characters; the limit is {limit} (MAX_CONVERSATION_CHARS)"
            )
        if not any(m.role == "user" and m.content.strip() for m in req.messages):
            raise DomainError("messages holds no non-empty 'user' message; facts are extracted from user turns")
        messages = [m.model_dump(mode="json") for m in req.messages]
        identity = {
            "user_id": req.user_id,
            "project_id": req.project_id,
            "messages": [[m["role"], normalise(m["content"])] for m in messages],
        }
        payload = {
            "user_id": req.user_id,
            "project_id": req.project_id,
            "agent_id": req.agent_id,
            "metadata": req.metadata,
            "messages": messages,
        }
        task_id = await self.tasks.enqueue("conversation", identity, payload)
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}")

    # ------------------------------------------------------------------ writes (worker side)

    async def store_conversation(self, task_id: str, job: dict[str, Any]) -> dict[str, Any]:
        """Extract facts, then store each as a raw write would, plus its entities and relations."""
        project_id: str | None = job.get("project_id")
        # A replayed job reuses the first extraction: an LLM may not answer the same twice,
        # and memory ids are positions in this list.
        extraction = await self.tasks.load_extraction(task_id)
        if extraction is None:
            messages = [Message.model_validate(m) for m in job["messages"]]
            extraction = await self.extractor.extract(messages, project_id)
            await self.tasks.save_extraction(task_id, extraction)
        memories: list[Memory] = []
        links: list[MemoryLinks] = []
        seen: set[tuple[str, str, str | None]] = set()
        for fact in extraction.facts:
            memory = self._fact_memory(task_id, len(memories), fact, job)
            key = (memory.hash, memory.scope.value, memory.project_id)
            if key in seen:
                continue
            seen.add(key)
            memories.append(memory)
            links.append(MemoryLinks(
                memory_id=memory.id,
                entities=[EntityRef(e.name, e.type) for e in fact.entities],
                relations=[
                    RelationRef(r.subject, r.predicate, r.object, r.fact, fact.valid_at) for r in fact.relations
                ],
            ))
        if memories:
            await self.write_memories(memories, links)
        log.info("conversation_extracted", extractor=extraction.extractor, facts=len(memories),
                 dropped=extraction.dropped, tokens=extraction.usage.total_tokens)
        return {
            "memories": [MemoryOut.of(m).model_dump(mode="json") for m in memories],
            "extractor": extraction.extractor,
            "usage": extraction.usage.model_dump(),
            "dropped": extraction.dropped,
        }

    def _fact_memory(self, task_id: str, index: int, fact: ExtractedFact, job: dict[str, Any]) -> Memory:
        project_id: str | None = job.get("project_id")
        # A project-default fact from a conversation without a project_id is kept as global
        # rather than dropped (docs/decisions.md).
        wanted = fact.scope or (None if project_id else Scope.GLOBAL)
        scope = resolve_scope(fact.category, wanted, project_id)
        metadata = dict(job.get("metadata") or {})
        if fact.valid_at:
            metadata["valid_at"] = fact.valid_at
        return Memory(
            id=memory_id_for(task_id, index),
            user_id=job["user_id"],
            content=fact.content,
            category=fact.category,
            scope=scope,
            project_id=project_id if scope is Scope.PROJECT else None,
            agent_id=job.get("agent_id"),
            hash=content_hash(fact.content),
            metadata=metadata,
            created_at=job["accepted_at"],
            updated_at=job["accepted_at"],
            task_id=task_id,
        )

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

    async def write_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None) -> None:
        vectors = await self.embedder.embed([m.content for m in memories])
        await self.vectors.upsert(memories, vectors)
        await self.graph.upsert_memories(memories, links)
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
