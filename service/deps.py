"""Build and close every client. Used by the API lifespan and the ARQ worker's startup.

Nothing here runs at import time: clients exist only between `build_deps` and `Deps.close`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from arq.connections import ArqRedis

from service.ai.embeddings import BatchingEmbedder, Embedder
from service.ai.extraction import Extractor
from service.ai.hashing import HashEmbedder
from service.ai.local import LocalEmbedder
from service.ai.offline import RuleLinkFinder
from service.identity import NameVectors, ResolutionGate
from service.memory import MemoryService
from service.outbox import MemoryLocks, Outbox
from service.queue import TaskQueue, connect_redis
from service.settings import Settings
from service.stores.graph import GraphStore
from service.stores.neo4j import Neo4jGraphStore
from service.stores.vector import VectorStore

log = structlog.get_logger(__name__)


@dataclass
class Deps:
    settings: Settings
    redis: ArqRedis
    tasks: TaskQueue
    vectors: VectorStore
    graph: GraphStore
    embedder: Embedder
    extractor: Extractor
    service: MemoryService
    genai_client: Any = None

    async def close(self) -> None:
        await self.vectors.close()
        await self.graph.close()
        await self.redis.aclose()
        if self.genai_client is not None:
            await self.genai_client.aio.aclose()


def build_vector_store(settings: Settings) -> VectorStore:
    if settings.qdrant_url:
        from service.stores.qdrant_server import QdrantServerVectorStore

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantServerVectorStore(settings.qdrant_url, settings.qdrant_collection, api_key=api_key)
    from service.stores.qdrant_edge import EdgeVectorStore

    return EdgeVectorStore(settings.resolved_qdrant_path, settings.qdrant_collection)


def build_ai(settings: Settings) -> tuple[Embedder, Extractor, Any]:
    """Gemini when GOOGLE_API_KEY is set (extraction; embeddings too with EMBEDDER=gemini),
    else the offline extractor. The choice is logged at start and shown by /health."""
    client = None
    if settings.google_api_key is not None:
        from service.ai.gemini import make_client

        client = make_client(
            settings.google_api_key.get_secret_value(), settings.gemini_base_url, settings.gemini_timeout_seconds
        )
    embedder: Embedder
    if settings.embedder == "gemini":
        from service.ai.gemini import GeminiEmbedder

        assert client is not None  # Settings refuses EMBEDDER=gemini without a key
        embedder = GeminiEmbedder(
            client, settings.gemini_embedder_model, dim=settings.gemini_embedding_dim,
            batch_size=settings.embedding_batch_size,
        )
    elif settings.embedder == "local":
        embedder = LocalEmbedder(batch_size=settings.embedding_batch_size)
    else:
        embedder = HashEmbedder()
    embedder = BatchingEmbedder(embedder, max_batch=settings.embedding_batch_size)
    extractor: Extractor
    if client is not None:
        from service.ai.gemini import GeminiExtractor

        extractor = GeminiExtractor(
            client, settings.gemini_llm_model, settings.gemini_llm_fallback_model,
            timeout_s=settings.gemini_timeout_seconds,
        )
    else:
        from service.ai.offline import OfflineExtractor

        extractor = OfflineExtractor()
        log.warning("offline_extraction", reason="GOOGLE_API_KEY is not set: using the offline rule-based extractor")
    return embedder, extractor, client


def build_graph_store(settings: Settings, embedder: Embedder | None = None) -> GraphStore:
    """`embedder`: the entity resolution gate's (ENTITY_RESOLUTION); without one, one entity per spelling."""
    password = settings.neo4j_password.get_secret_value() if settings.neo4j_password else None
    resolver = None
    if embedder is not None and settings.entity_resolution:
        gate = ResolutionGate(settings.auto_merge_threshold, settings.pending_match_threshold)
        resolver = NameVectors(embedder, gate)
    return Neo4jGraphStore(
        settings.neo4j_uri,
        settings.neo4j_user,
        password,
        settings.neo4j_database,
        settings.graph_timeout_seconds,
        resolver,
    )


async def build_deps(settings: Settings) -> Deps:
    redis = await connect_redis(settings)
    embedder, extractor, genai_client = build_ai(settings)
    vectors = build_vector_store(settings)
    graph = build_graph_store(settings, embedder)
    try:
        await vectors.ensure_collection(embedder.dim, embedder.name)
        await graph.ensure_schema()
        if settings.embedder == "local":
            await embedder.embed(["warm-up"])  # load the model now, not on the first request
    except BaseException:
        await vectors.close()
        await graph.close()
        await redis.aclose()
        if genai_client is not None:
            await genai_client.aio.aclose()
        raise
    tasks = TaskQueue(redis, settings)
    service = MemoryService(settings, tasks, vectors, graph, embedder, extractor, Outbox(redis, settings),
                            MemoryLocks(redis, settings), RuleLinkFinder())
    log.info(
        "deps_ready",
        profile=settings.profile,
        vector_store=getattr(vectors, "name", "?"),
        graph_store=graph.name,
        embedder=embedder.name,
        extractor=extractor.name,
        embedded_worker=settings.run_embedded_worker,
    )
    return Deps(settings, redis, tasks, vectors, graph, embedder, extractor, service, genai_client)
