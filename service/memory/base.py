"""The read side's shared state: the stores, the task queue, the query embedder, and the owner check and listing
filter of service/memory/rules.py. Reads are in reads.py, curation in curation.py, export in portability.py;
MemoryService (service.py) is those. The API-side intake (intake.py) and the worker-side writer (writes.py) are
objects of their own."""

from __future__ import annotations

import asyncio

import structlog

from service.ai.embeddings import Embedder
from service.core.kv import RedisKV
from service.core.settings import Settings
from service.search.searcher import Searcher
from service.search.usage import RetrievalCounts
from service.stores.graph import GraphStore
from service.stores.vector import VectorStore
from service.tasks.queue import TaskQueue
from service.text.tokens import token_counter
from service.writepath.outbox import Outbox

log = structlog.get_logger(__name__)


class MemoryBase:
    def __init__(
        self,
        settings: Settings,
        tasks: TaskQueue,
        vectors: VectorStore,
        graph: GraphStore,
        embedder: Embedder,
        outbox: Outbox,
        kv: RedisKV,
        query_embedder: Embedder | None = None,
        usage: RetrievalCounts | None = None,
    ) -> None:
        self.settings = settings
        self.tasks = tasks
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder  # the write path's (what an export names)
        self.query_embedder = query_embedder or embedder  # a search's (in this process: no queue behind writes)
        self.outbox = outbox  # read here: its depth
        self.kv = kv  # read here: the write-path counters
        self.searcher = Searcher(settings, vectors, graph, self.query_embedder)
        self.usage = usage  # how often search returned each memory (the context's order)
        self.tokens = token_counter(self.query_embedder)  # the context's budget
        self.trace_writes: set[asyncio.Task[None]] = set()  # retrieval traces being written (curation.py)
