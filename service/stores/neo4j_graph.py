"""Neo4j backend of the GraphStore Protocol (async driver, `execute_write`/`execute_read`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, LiteralString

import structlog
from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable

from service.domain import Memory
from service.errors import DependencyUnavailable

log = structlog.get_logger(__name__)

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
    "CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE",
    "CREATE INDEX memory_user IF NOT EXISTS FOR (m:Memory) ON (m.user_id, m.scope, m.project_id)",
    "CREATE INDEX memory_hash IF NOT EXISTS FOR (m:Memory) ON (m.hash)",
    "CREATE INDEX entity_user IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.group_id)",
)

_UPSERT_MEMORIES: LiteralString = """
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
SET m += row
"""


def _row(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "user_id": m.user_id,
        "content": m.content,
        "category": m.category,
        "scope": m.scope.value,
        "project_id": m.project_id,
        "group_id": group_id(m.scope.value, m.project_id),
        "agent_id": m.agent_id,
        "hash": m.hash,
        "metadata": json.dumps(m.metadata, sort_keys=True),
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "task_id": m.task_id,
    }


def group_id(scope: str, project_id: str | None) -> str:
    """Seed 001's namespace: "global" or "project--<id>"."""
    return "global" if scope == "global" or not project_id else f"project--{project_id}"


class Neo4jGraphStore:
    name = "neo4j"

    def __init__(self, uri: str, user: str, password: str | None, database: str, timeout: float) -> None:
        auth = (user, password) if password else None
        self._driver: AsyncDriver = AsyncGraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=timeout,
            connection_acquisition_timeout=timeout,
            max_transaction_retry_time=timeout,
        )
        self._db = database
        self._timeout = timeout

    async def _write(self, fn: Any, **params: Any) -> Any:
        try:
            async with self._driver.session(database=self._db) as session:
                return await session.execute_write(fn, **params)
        except (ServiceUnavailable, DriverError, OSError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc

    async def _read(self, fn: Any, **params: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                async with self._driver.session(database=self._db) as session:
                    return await session.execute_read(fn, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc

    async def ensure_schema(self) -> None:
        async def run(tx: AsyncManagedTransaction, stmt: LiteralString) -> None:
            await (await tx.run(stmt)).consume()

        for stmt in SCHEMA:
            try:
                await self._write(run, stmt=stmt)
            except Neo4jError as exc:  # an equivalent index under another name is fine
                if "EquivalentSchemaRule" not in (exc.code or ""):
                    raise
        log.info("graph_schema_ready", statements=len(SCHEMA))

    async def upsert_memories(self, memories: list[Memory]) -> None:
        async def run(tx: AsyncManagedTransaction, rows: list[dict[str, Any]]) -> None:
            await (await tx.run(_UPSERT_MEMORIES, rows=rows)).consume()

        await self._write(run, rows=[_row(m) for m in memories])

    async def count_memories(self, user_id: str) -> int:
        async def run(tx: AsyncManagedTransaction, user_id: str) -> int:
            rec = await (await tx.run(
                "MATCH (m:Memory {user_id: $user_id}) RETURN count(m) AS n", user_id=user_id
            )).single()
            return int(rec["n"]) if rec else 0

        return int(await self._read(run, user_id=user_id))

    async def ping(self) -> None:
        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run("RETURN 1")).consume()

        await self._read(run)

    async def close(self) -> None:
        await self._driver.close()
