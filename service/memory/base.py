"""The memory service's shared state and rules: the stores, the queue, the AI backends, input checks and
the listing filter. Writes are in writes.py, reads in reads.py; MemoryService (service.py) is both."""

from __future__ import annotations

import asyncio
from typing import TypeVar

import structlog

from service.ai.embeddings import Embedder
from service.ai.extraction import Extractor, LinkFinder
from service.domain import Memory, Scope, check_category
from service.errors import DomainError, NotFound, PayloadTooLarge
from service.ledger import Ledger
from service.outbox import MemoryLocks
from service.queue import TaskQueue
from service.schemas import AcceptedResponse
from service.search.searcher import Searcher
from service.settings import Settings
from service.stores.graph import (
    GraphStore,
)
from service.stores.vector import MemoryFilter, VectorStore

log = structlog.get_logger(__name__)
_T = TypeVar("_T")



class MemoryBase:
    def __init__(
        self,
        settings: Settings,
        tasks: TaskQueue,
        vectors: VectorStore,
        graph: GraphStore,
        embedder: Embedder,
        extractor: Extractor,
        ledger: Ledger,
        locks: MemoryLocks,
        links: LinkFinder,
        query_embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.tasks = tasks
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder  # the write path's
        self.query_embedder = query_embedder or embedder  # a search's (in this process: no queue behind writes)
        self.extractor = extractor
        self.ledger = ledger  # the only writer of either store for a memory
        self.outbox = ledger.outbox  # read here: tombstones and its depth
        self.locks = locks
        self.links = links
        self.searcher = Searcher(settings, vectors, graph, self.query_embedder)
        self.trace_writes: set[asyncio.Task[None]] = set()  # retrieval traces being written (curation.py)

    # ------------------------------------------------------------------ validation

    def check_content(self, content: str) -> str:
        if not content.strip():
            raise DomainError("content is empty")
        limit = self.settings.max_content_chars
        if len(content) > limit:
            raise PayloadTooLarge(f"content has {len(content)} characters; the limit is {limit} (MAX_CONTENT_CHARS)")
        return content


    async def _existing(self, ids: list[str], user_id: str | None) -> list[Memory]:
        found = {m.id: m for m in await self.vectors.get(ids)}
        missing = [i for i in ids if i not in found or (user_id is not None and found[i].user_id != user_id)]
        if missing:
            raise NotFound(f"unknown memory id '{missing[0]}'")
        return [found[i] for i in ids]


    @staticmethod
    def _accepted(task_id: str) -> AcceptedResponse:
        return AcceptedResponse(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}")


    # ------------------------------------------------------------------ listing and context

    @staticmethod
    def _list_filter(
        user_id: str,
        scope: str | None,
        category: str | None,
        project_id: str | None,
        agent_id: str | None,
        *,
        all_scopes: bool,
    ) -> MemoryFilter:
        """Listing filter. Without scope: with project_id -> global + that project; without
        project_id -> every memory of the user (all_scopes) ."""
        if category is not None:
            check_category(category)
        scope_value = Scope(scope) if scope else None
        if scope_value is None and project_id is None and all_scopes:
            # MemoryFilter's no-scope rule is "global only"; a listing of everything asks per scope.
            return MemoryFilter(user_id=user_id, categories=(category,) if category else None, agent_id=agent_id,
                                all_scopes=True)
        return MemoryFilter(
            user_id=user_id,
            project_id=project_id,
            scope=scope_value,
            categories=(category,) if category else None,
            agent_id=agent_id,
        )

