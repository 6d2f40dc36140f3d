"""Build and close every client. Used by the API lifespan and the ARQ worker's startup.

Nothing here runs at import time: clients exist only between `build_deps` and `Deps.close`.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from arq.connections import ArqRedis

from service.ai.embeddings import Embedder, build_embedder
from service.memory_service import MemoryService
from service.queue import TaskQueue, connect_redis
from service.settings import Settings
from service.stores.graph import GraphStore
from service.stores.neo4j_graph import Neo4jGraphStore
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
    service: MemoryService

    async def close(self) -> None:
        await self.vectors.close()
        await self.graph.close()
        await self.redis.aclose()


def build_vector_store(settings: Settings) -> VectorStore:
    if settings.qdrant_url:
        from service.stores.qdrant_server import QdrantServerVectorStore

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantServerVectorStore(settings.qdrant_url, settings.qdrant_collection, api_key=api_key)
    from service.stores.qdrant_edge import EdgeVectorStore

    return EdgeVectorStore(settings.resolved_qdrant_path, settings.qdrant_collection)


def build_graph_store(settings: Settings) -> GraphStore:
    password = settings.neo4j_password.get_secret_value() if settings.neo4j_password else None
    return Neo4jGraphStore(
        settings.neo4j_uri,
        settings.neo4j_user,
        password,
        settings.neo4j_database,
        settings.graph_timeout_seconds,
    )


async def build_deps(settings: Settings) -> Deps:
    redis = await connect_redis(settings)
    embedder = build_embedder(settings)
    vectors = build_vector_store(settings)
    graph = build_graph_store(settings)
    try:
        await vectors.ensure_collection(embedder.dim, embedder.name)
        await graph.ensure_schema()
    except BaseException:
        await vectors.close()
        await graph.close()
        await redis.aclose()
        raise
    tasks = TaskQueue(redis, settings)
    service = MemoryService(settings, tasks, vectors, graph, embedder)
    log.info(
        "deps_ready",
        profile=settings.profile,
        vector_store=getattr(vectors, "name", "?"),
        graph_store=graph.name,
        embedder=embedder.name,
        embedded_worker=settings.run_embedded_worker,
    )
    return Deps(settings, redis, tasks, vectors, graph, embedder, service)
