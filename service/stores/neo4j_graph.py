"""Neo4j backend of the GraphStore Protocol (async driver, `execute_write`/`execute_read`)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, LiteralString

import structlog
from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable

from service.domain import ID_NAMESPACE, Memory
from service.errors import DependencyUnavailable
from service.stores.graph import EntityRef, MemoryLinks

log = structlog.get_logger(__name__)

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
    "CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE",
    "CREATE INDEX memory_user IF NOT EXISTS FOR (m:Memory) ON (m.user_id, m.scope, m.project_id)",
    "CREATE INDEX memory_hash IF NOT EXISTS FOR (m:Memory) ON (m.hash)",
    "CREATE INDEX entity_user IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.group_id)",
    "CREATE INDEX entity_name IF NOT EXISTS FOR (e:Entity) ON (e.user_id, e.name_lc)",
    "CREATE INDEX relates_id IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.id)",
    "CREATE INDEX relates_user IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.user_id)",
)

_UPSERT_MEMORIES: LiteralString = """
UNWIND $rows AS row
MERGE (m:Memory {id: row.id})
SET m += row
"""

_UPSERT_ENTITIES: LiteralString = """
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
ON CREATE SET e.user_id = row.user_id, e.group_id = row.group_id, e.name = row.name,
              e.name_lc = row.name_lc, e.type = row.type, e.aliases = [], e.created_at = row.created_at
SET e.type = CASE WHEN e.type = 'thing' THEN row.type ELSE e.type END,
    e.aliases = CASE WHEN row.name = e.name OR row.name IN e.aliases THEN e.aliases ELSE e.aliases + row.name END
"""

_UPSERT_MENTIONS: LiteralString = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.memory_id})
MATCH (e:Entity {id: row.entity_id})
MERGE (m)-[:MENTIONS]->(e)
"""

_UPSERT_RELATIONS: LiteralString = """
UNWIND $rows AS row
MATCH (s:Entity {id: row.source_id})
MATCH (o:Entity {id: row.target_id})
MERGE (s)-[r:RELATES {id: row.id}]->(o)
ON CREATE SET r.user_id = row.user_id, r.group_id = row.group_id, r.predicate = row.predicate,
              r.valid_at = row.valid_at, r.invalid_at = null, r.expired_at = null,
              r.memory_ids = [], r.created_at = row.created_at
SET r.fact = row.fact,
    r.memory_ids = CASE WHEN row.memory_id IN r.memory_ids THEN r.memory_ids ELSE r.memory_ids + row.memory_id END
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


def entity_id(user_id: str, group: str, name: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"entity|{user_id}|{group}|{name.strip().casefold()}"))


def relation_id(user_id: str, group: str, subject: str, predicate: str, obj: str) -> str:
    key = f"rel|{user_id}|{group}|{subject.strip().casefold()}|{predicate}|{obj.strip().casefold()}"
    return str(uuid.uuid5(ID_NAMESPACE, key))


def _link_rows(memories: list[Memory], links: list[MemoryLinks]) -> dict[str, list[dict[str, Any]]]:
    by_id = {m.id: m for m in memories}
    entities: dict[str, dict[str, Any]] = {}
    mentions: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []

    def entity(m: Memory, group: str, ref: EntityRef) -> str:
        eid = entity_id(m.user_id, group, ref.name)
        if eid not in entities or entities[eid]["type"] == "thing":
            entities[eid] = {"id": eid, "user_id": m.user_id, "group_id": group, "name": ref.name.strip(),
                             "name_lc": ref.name.strip().casefold(), "type": ref.type, "created_at": m.created_at}
        return eid

    for link in links:
        m = by_id[link.memory_id]
        group = group_id(m.scope.value, m.project_id)
        for ref in link.entities:
            mentions.append({"memory_id": m.id, "entity_id": entity(m, group, ref)})
        for rel in link.relations:
            known = {e.name.casefold(): e.type for e in link.entities}
            src = entity(m, group, EntityRef(rel.subject, known.get(rel.subject.casefold(), "thing")))
            dst = entity(m, group, EntityRef(rel.object, known.get(rel.object.casefold(), "thing")))
            mentions += [{"memory_id": m.id, "entity_id": src}, {"memory_id": m.id, "entity_id": dst}]
            relations.append({
                "id": relation_id(m.user_id, group, rel.subject, rel.predicate, rel.object),
                "source_id": src, "target_id": dst, "user_id": m.user_id, "group_id": group,
                "predicate": rel.predicate, "fact": rel.fact, "valid_at": rel.valid_at or m.created_at,
                "created_at": m.created_at, "memory_id": m.id,
            })
    return {"entities": list(entities.values()), "mentions": mentions, "relations": relations}


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
            async with asyncio.timeout(self._timeout * 6):
                async with self._driver.session(database=self._db) as session:
                    return await session.execute_write(fn, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
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

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None) -> None:
        graph = _link_rows(memories, links or [])

        async def run(tx: AsyncManagedTransaction, rows: list[dict[str, Any]]) -> None:
            await (await tx.run(_UPSERT_MEMORIES, rows=rows)).consume()
            for stmt, key in ((_UPSERT_ENTITIES, "entities"), (_UPSERT_MENTIONS, "mentions"),
                              (_UPSERT_RELATIONS, "relations")):
                if graph[key]:
                    await (await tx.run(stmt, rows=graph[key])).consume()

        await self._write(run, rows=[_row(m) for m in memories])

    async def entities(self, user_id: str) -> list[dict[str, object]]:
        async def run(tx: AsyncManagedTransaction, user_id: str) -> list[dict[str, object]]:
            result = await tx.run(
                "MATCH (e:Entity {user_id: $user_id}) "
                "RETURN e.id AS id, e.name AS name, e.type AS type, e.aliases AS aliases, e.group_id AS group_id "
                "ORDER BY e.name",
                user_id=user_id,
            )
            return [dict(r) for r in await result.data()]

        rows: list[dict[str, object]] = await self._read(run, user_id=user_id)
        return rows

    async def relations(self, user_id: str) -> list[dict[str, object]]:
        async def run(tx: AsyncManagedTransaction, user_id: str) -> list[dict[str, object]]:
            result = await tx.run(
                "MATCH (s:Entity)-[r:RELATES {user_id: $user_id}]->(o:Entity) "
                "RETURN r.id AS id, s.name AS source, r.predicate AS predicate, o.name AS target, "
                "r.fact AS fact, r.valid_at AS valid_at, r.invalid_at AS invalid_at, "
                "r.expired_at AS expired_at, r.memory_ids AS memory_ids, r.group_id AS group_id "
                "ORDER BY source, predicate, target",
                user_id=user_id,
            )
            return [dict(r) for r in await result.data()]

        rows: list[dict[str, object]] = await self._read(run, user_id=user_id)
        return rows

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
