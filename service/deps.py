"""Build and close every client. Used by the API lifespan and the ARQ worker's startup.

Nothing here runs at import time: clients exist only between `build_deps` and `Deps.close`.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import structlog
from arq.connections import ArqRedis

from service.ai.embeddings import BatchingEmbedder, Embedder
from service.ai.extraction import Extractor
from service.ai.hashing import HashEmbedder
from service.ai.local import COMPATIBLE_VARIANTS, LocalEmbedder, ModelFiles
from service.ai.offline.process import ProcessExtractor
from service.ai.process import ProcessEmbedder
from service.ai.provider import LlmProvider
from service.ai.tokens import token_counter
from service.conversations.intake import ConversationIntake
from service.conversations.service import ConversationService
from service.core.embedding_models import MODELS
from service.core.kv import RedisKV
from service.core.loop import LoopMonitor
from service.core.redis_client import connect_redis
from service.core.settings import Settings
from service.graph_api.intake import GraphIntake
from service.graph_api.reads import GraphFacts
from service.identity.gate import Band, ResolutionGate
from service.identity.rules import NameRules, NameVectors
from service.ledger.ledger import Ledger
from service.ledger.outbox import MemoryLocks, Outbox
from service.maintenance.records import MaintenanceRecords
from service.maintenance.runs import MaintenanceRuns
from service.memory.backlog import Backlog
from service.memory.curation import Curation
from service.memory.graph_reads import GraphReads
from service.memory.health import HealthCheck, Slowness
from service.memory.intake import Intake
from service.memory.portability import Exporter
from service.memory.reads import MemoryReads
from service.memory.search import MemorySearch
from service.memory.traces import Traces
from service.runs.intake import RunIntake
from service.runs.service import RunService
from service.search.searcher import Searcher
from service.search.usage import RetrievalCounts
from service.stores.graph import GraphStore
from service.stores.neo4j.store import Neo4jGraphStore
from service.stores.vector import VectorStore
from service.tasks.functions import FUNCTIONS
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)


@dataclass
class Deps:
    settings: Settings
    redis: ArqRedis
    tasks: TaskQueue
    kv: RedisKV
    vectors: VectorStore
    graph: GraphStore
    embedder: Embedder  # the write path's (a child process in the embedded profile); queries: query_embedder
    extractor: Extractor
    query_embedder: Embedder  # a search's (in this process: no queue behind writes)
    memories: MemoryReads  # the read side: a memory, a listing, a task's status
    search: MemorySearch  # the read side: search, context
    traces: Traces  # the read side: retrieval traces
    curation: Curation  # the read side: duplicates, merges, graph statistics
    graph_reads: GraphReads  # the read side: graph search and listings
    backlog: Backlog  # the write path's gauges and /health figures
    health: HealthCheck  # /health and the console's health page
    exporter: Exporter  # the export
    intake: Intake  # the API side of writes: validate, enqueue
    runs: RunService  # task traces: the reads
    run_intake: RunIntake  # task traces: the API side of writes
    conversations: ConversationService  # conversations: the reads
    conversation_intake: ConversationIntake  # conversations: the API side of deletes
    graph_intake: GraphIntake  # the graph API: the API side of structured writes
    graph_facts: GraphFacts  # the graph API: facts about an entity, structural queries
    outbox: Outbox  # the write path's intents
    ledger: Ledger  # the write path's one owner of both stores' writes (the worker's handlers: worker/handlers.py)
    locks: MemoryLocks  # per-memory locks of the write path
    usage: RetrievalCounts  # how often each memory was retrieved (searches add, writes carry over)
    llm: LlmProvider | None = None  # the extraction's provider (LLM_PROVIDER: Gemini or an OpenAI-compatible server)
    embed_child: ProcessEmbedder | None = None  # the write path's embedder process (EMBED_PROCESS)
    loop: LoopMonitor | None = None  # this process's event-loop lag: a metric, /health, the worker's back-pressure
    resources: AsyncExitStack = field(default_factory=AsyncExitStack)  # every client, closed in reverse order

    @property
    def maintenance(self) -> MaintenanceRuns:
        """Maintenance runs: submit, read the records, expire observations."""
        s = self.settings
        return MaintenanceRuns(s.dedup, s.calibration.dedup, s.hooks, self.tasks,
                               MaintenanceRecords(self.redis, s.redis), self.vectors)

    async def close(self) -> None:
        if self.loop is not None:
            await self.loop.stop()
        if self.traces.trace_writes:  # traces being written after their search answered: let them land
            await asyncio.wait(set(self.traces.trace_writes), timeout=self.settings.neo4j.timeout_seconds)
        await self.resources.aclose()


def build_vector_store(settings: Settings) -> VectorStore:
    if settings.qdrant.url:
        from service.stores.qdrant_server import QdrantServerVectorStore

        api_key = settings.qdrant.api_key.get_secret_value() if settings.qdrant.api_key else None
        return QdrantServerVectorStore(settings.qdrant.url, settings.qdrant.collection, api_key=api_key)
    if not settings.qdrant.on_disk:  # QDRANT_ON_DISK=false: in memory, gone at exit
        from service.stores.qdrant_server import QdrantServerVectorStore

        return QdrantServerVectorStore(":memory:", settings.qdrant.collection)
    from service.stores.qdrant_edge import EdgeVectorStore

    return EdgeVectorStore(settings.resolved_qdrant_path, settings.qdrant.collection)


def local_model_files(settings: Settings) -> ModelFiles:
    """EMBEDDER_MODEL_DIR's model, else EMBEDDER_MODEL's from the registry (its files in MODEL_CACHE_DIR)."""
    if settings.embeddings.model_dir is not None:
        return ModelFiles.from_dir(settings.embeddings.model_dir, settings.embeddings.model_id)
    return ModelFiles.registered(MODELS[settings.embeddings.model], settings.resolved_model_cache_dir)


def build_providers(settings: Settings, redis: Any = None) -> dict[str, LlmProvider]:
    """The LLM providers the settings use, by name: Gemini when it extracts (LLM_PROVIDER resolved to gemini) or
    embeds (EMBEDDER=gemini), an OpenAI-compatible server likewise (service/ai/openai/provider.py); with `redis`,
    the structured-output modes the OpenAI one learns are shared there (/health)."""
    providers: dict[str, LlmProvider] = {}
    provider, embedder = settings.resolved_llm_provider, settings.embeddings.embedder
    from service.ai.openai.provider import OpenAIProvider

    if OpenAIProvider.wanted(provider, embedder):
        openai = OpenAIProvider(settings.llm, settings.embeddings)
        if redis is not None:
            openai.share_modes(redis, settings.redis.queue_name)
        providers["openai"] = openai
    if settings.gemini.api_key is not None and (provider == "gemini" or embedder == "gemini"):
        from service.ai.gemini.provider import GeminiProvider

        providers["gemini"] = GeminiProvider(settings.gemini, settings.embeddings)
    return providers


def build_ai(settings: Settings, providers: dict[str, LlmProvider]) -> tuple[Embedder, Extractor]:
    """LLM_PROVIDER (docs/llm.md): Gemini (the default when GOOGLE_API_KEY is set), an OpenAI-compatible server, else
    the offline extractor; EMBEDDER: local, gemini, openai or hash. The choice is logged at start and shown by
    /health."""
    embedder: Embedder
    if settings.embeddings.embedder in providers:
        embedder = providers[settings.embeddings.embedder].embedder()
    elif settings.embeddings.embedder == "local":
        embedder = LocalEmbedder(local_model_files(settings), settings.embeddings.batch_size,
                                 settings.embeddings.threads)
    else:
        embedder = HashEmbedder()
    embedder = BatchingEmbedder(embedder, max_batch=settings.embeddings.batch_size)
    llm = providers.get(settings.resolved_llm_provider)
    if llm is not None:
        return embedder, llm.extractor()
    log.warning("offline_extraction", reason="LLM_PROVIDER=offline" if settings.llm.provider == "offline" else
                "GOOGLE_API_KEY is not set: using the offline rule-based extractor")
    return embedder, ProcessExtractor()  # the rules in a process of their own: never on a loop that talks to Redis


def resolution_gate(settings: Settings) -> ResolutionGate:
    """The entity resolution gate as configured: thresholds per type family, fuzzy matching, ambiguity margin."""
    return ResolutionGate(
        settings.identity.auto_merge_threshold, settings.identity.pending_match_threshold,
        {family: Band(merge, pending) for family, (merge, pending) in settings.identity.bands.items()},
        settings.identity.fuzzy_matching, settings.identity.ambiguity_margin, settings.calibration)


def build_graph_store(settings: Settings, embedder: Embedder | None = None) -> Neo4jGraphStore:
    """`embedder`: the entity resolution gate's (ENTITY_RESOLUTION); without one, one entity per spelling. The
    backend's parts are its attributes: build_deps hands each caller the part it uses."""
    password = settings.neo4j.password.get_secret_value() if settings.neo4j.password else None
    names = NameRules()
    if embedder is not None and settings.identity.resolution:
        names = NameVectors(embedder, resolution_gate(settings))
    return Neo4jGraphStore(
        settings.neo4j.uri,
        settings.neo4j.user,
        password,
        settings.neo4j.database,
        settings.neo4j.timeout_seconds,
        names,
    )


async def build_deps(settings: Settings, vectors: VectorStore | None = None, *, role: str = "api") -> Deps:
    """`vectors`: a store to use instead of the configured one (the worker process's, worker/child.py); `role`: what
    this process is ("api", with or without its worker inside; "worker"), for its event-loop figures. Every client
    is entered into one AsyncExitStack as it is made: a start that fails closes what was made, and `Deps.close`
    closes the lot."""
    resources = AsyncExitStack()
    try:
        redis = await connect_redis(settings.redis)
        resources.push_async_callback(redis.aclose)
        providers = build_providers(settings, redis)
        for provider in providers.values():
            resources.push_async_callback(provider.aclose)
        llm = providers.get(settings.resolved_llm_provider)
        embedder, extractor = build_ai(settings, providers)
        if isinstance(extractor, ProcessExtractor):
            resources.callback(extractor.close)
        write_embedder: Embedder = embedder
        child = (ProcessEmbedder(local_model_files(settings), settings.embeddings.batch_size,
                                 settings.embeddings.threads, settings.embeddings.process_nice)
                 if settings.embeds_in_child else None)
        if child is not None:
            resources.push_async_callback(child.close)
            write_embedder = BatchingEmbedder(child, max_batch=settings.embeddings.batch_size)
        vectors = vectors or build_vector_store(settings)
        resources.push_async_callback(vectors.close)
        graph = build_graph_store(settings, write_embedder)
        resources.push_async_callback(graph.close)
        for provider in providers.values():  # EMBEDDER=openai: the server's dimension against OPENAI_EMBEDDING_DIM
            await provider.check()
        await vectors.ensure_collection(embedder.dim, embedder.name, embedder.variant,
                                        COMPATIBLE_VARIANTS.get(embedder.name, frozenset()),
                                        settings.embeddings.allow_change)
        await graph.ensure_schema()
        if settings.embeddings.embedder == "local":  # load the model(s) now, not on the first request
            await asyncio.gather(embedder.embed(["warm-up"]), write_embedder.embed(["warm-up"]))
    except BaseException:
        await resources.aclose()
        raise
    tasks = TaskQueue(redis, settings.redis, FUNCTIONS)
    kv = RedisKV(redis, settings.redis)
    outbox = Outbox(redis, settings.redis)
    usage = RetrievalCounts(redis, settings.redis)
    traces = Traces(graph, settings.retention.trace_ttl_days, settings.neo4j.timeout_seconds)
    searcher = Searcher(settings.search, vectors, graph.reads, embedder, graph_timeout_s=settings.neo4j.timeout_seconds,
                        graph_entity_weight=settings.calibration.graph_entity,
                        relevance_floor=settings.calibration.relevance)
    search = MemorySearch(searcher, vectors, traces, token_counter(embedder),
                          settings.search.context_recency_days, usage, retired=graph.reads,
                          graph_timeout_s=settings.neo4j.timeout_seconds)
    log.info(
        "deps_ready",
        profile=settings.profile,
        vector_store=getattr(vectors, "name", "?"),
        graph_store=graph.name,
        embedder=embedder.name,
        extractor=extractor.name,
        embedded_worker=settings.run_embedded_worker,
        worker_process=settings.worker.process,
        write_embedder="child process" if child is not None else "in process",
    )
    backlog = Backlog(tasks.leases, outbox, kv)
    monitor = LoopMonitor(role, kv.note_loop)
    monitor.start()
    return Deps(
        settings=settings, redis=redis, tasks=tasks, kv=kv, vectors=vectors, graph=graph, embedder=write_embedder,
        extractor=extractor, query_embedder=embedder, memories=MemoryReads(vectors, tasks.records), search=search,
        traces=traces, curation=Curation(graph.curation), graph_reads=GraphReads(graph), backlog=backlog,
        health=HealthCheck(settings.profile, settings.neo4j.timeout_seconds, tasks, vectors, graph, backlog,
                           write_embedder, extractor, llm, slowness=Slowness(settings.writepath, kv, tasks.leases)),
        exporter=Exporter(vectors, graph, write_embedder),
        intake=Intake(settings.service, tasks, kv, vectors, graph.reads, outbox),
        runs=RunService(graph.run_reads, write_embedder, embedder, settings.calibration.run_match,
                        query_vector=searcher.query_vector),
        run_intake=RunIntake(tasks, kv, graph.run_reads),
        conversations=ConversationService(graph.conversations, llm.summarizer() if llm is not None else None),
        conversation_intake=ConversationIntake(tasks, graph.conversations),
        graph_intake=GraphIntake(settings.service, tasks, graph.facts),
        graph_facts=GraphFacts(graph.facts, graph.communities), outbox=outbox,
        ledger=Ledger(outbox, vectors, graph.memories), locks=MemoryLocks(redis, settings.redis), usage=usage,
        llm=llm, embed_child=child, loop=monitor, resources=resources,
    )
