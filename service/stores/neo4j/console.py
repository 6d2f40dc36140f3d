"""The web console's graph reads (`ConsoleReads`, service/stores/console.py): `ConsoleGraph`."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.neo4j.cypher_reads import FACT_FIELDS
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import check_id, clamp, edge_item

MAX_CONSOLE_LIMIT = 1000

ENTITY_KEYS: LiteralString = """.id, .name, .type, .aliases, .roles, .group_id, .created_at, .merged_into, .merged_at,
  .resolution_action, .resolution_score, .resolution_match_type, .resolution_reason"""

ENTITIES_BY_ID: LiteralString = """
MATCH (e:Entity) WHERE e.user_id = $user_id AND e.id IN $ids
RETURN e{""" + ENTITY_KEYS + "} AS item"

# `e.id IS NOT NULL` lets the planner seek the (user_id, id) index: the user's entities, not every user's (a label
# scan otherwise).
FIND_ENTITIES: LiteralString = """
MATCH (e:Entity) WHERE e.user_id = $user_id AND e.id IS NOT NULL AND e.merged_into IS NULL
  AND ($q = '' OR toLower(e.name) CONTAINS $q OR any(a IN coalesce(e.aliases, []) WHERE toLower(a) CONTAINS $q))
WITH e, COUNT { (e)-[:RELATES]-() } AS degree
ORDER BY degree DESC, e.id LIMIT $limit
RETURN e{""" + ENTITY_KEYS + ", degree: degree} AS item"

MEMORY_FACTS: LiteralString = """
MATCH (m:Memory) WHERE m.user_id = $user_id AND m.id = $memory_id
MATCH (m)-[:MENTIONS]->(:Entity)-[r:RELATES]-()
WHERE $memory_id IN r.memory_ids
WITH DISTINCT r LIMIT $limit
RETURN """ + FACT_FIELDS

# The entity's live memories, newest first (an index seek on the entity; its MENTIONS edges from there).
ENTITY_MEMORIES: LiteralString = """
MATCH (e:Entity) WHERE e.user_id = $user_id AND e.id = $entity_id
MATCH (m:Memory)-[:MENTIONS]->(e) WHERE m.user_id = $user_id AND m.deleted_at IS NULL
WITH DISTINCT m ORDER BY m.created_at DESC, m.id LIMIT $limit
RETURN m.id AS id
"""

MERGED: LiteralString = """
MATCH (e:Entity) WHERE e.user_id = $user_id AND e.merged_into IS NOT NULL AND ($into IS NULL OR e.merged_into = $into)
WITH e ORDER BY e.merged_at DESC LIMIT $limit
RETURN e{""" + ENTITY_KEYS + "} AS item"


class ConsoleGraph:
    """The console's reads (`ConsoleReads`)."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor

    async def _rows(self, stmt: LiteralString, key: str, **params: Any) -> list[dict[str, Any]]:
        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(stmt, **params)
            return [dict(r[key]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        return rows

    async def entities(self, user_id: str, ids: list[str]) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")
        if not ids:
            return []
        return await self._rows(ENTITIES_BY_ID, "item", user_id=user_id, ids=ids[:MAX_CONSOLE_LIMIT])

    async def find_entities(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")
        return await self._rows(FIND_ENTITIES, "item", user_id=user_id, q=query.casefold().strip()[:200],
                                limit=clamp(limit, MAX_CONSOLE_LIMIT))

    async def memory_facts(self, user_id: str, memory_id: str, limit: int) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")
        rows = await self._rows(MEMORY_FACTS, "fact", user_id=user_id, memory_id=check_id(memory_id, "memory id"),
                                limit=clamp(limit, MAX_CONSOLE_LIMIT))
        return [dict(edge_item(r)) for r in rows]

    async def merged_entities(self, user_id: str, into: str | None, limit: int) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")
        return await self._rows(MERGED, "item", user_id=user_id, into=into, limit=clamp(limit, MAX_CONSOLE_LIMIT))

    async def entity_memories(self, user_id: str, entity_id: str, limit: int) -> list[str]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> list[str]:
            result = await tx.run(ENTITY_MEMORIES, user_id=user_id, entity_id=check_id(entity_id, "entity id"),
                                  limit=clamp(limit, MAX_CONSOLE_LIMIT))
            return [str(r["id"]) for r in await result.data()]

        ids: list[str] = await self._exec.read(run)
        return ids
