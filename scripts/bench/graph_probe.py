"""What tests read from the graph beyond the service's own reads: counts and raw rows, straight from Neo4j."""

from __future__ import annotations

from typing import Any

from neo4j import AsyncManagedTransaction

from service.stores.neo4j.store import Neo4jGraphStore


async def _rows(store: Any, stmt: str, **params: Any) -> list[dict[str, Any]]:
    assert isinstance(store, Neo4jGraphStore)

    async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
        return [dict(r) for r in await (await tx.run(stmt, **params)).data()]  # type: ignore[arg-type]

    rows: list[dict[str, Any]] = await store.executor.read(run)
    return rows


async def count_memories(store: Any, user_id: str) -> int:
    """Live (:Memory) nodes only (deleted and deduplicated ones are history)."""
    rows = await _rows(store, "MATCH (m:Memory {user_id: $user_id}) WHERE m.deleted_at IS NULL "
                              "RETURN count(m) AS n", user_id=user_id)
    return int(rows[0]["n"])


async def entities(store: Any, user_id: str) -> list[dict[str, Any]]:
    return await _rows(store, "MATCH (e:Entity {user_id: $user_id}) RETURN e.id AS id, e.name AS name, "
                              "e.type AS type, e.aliases AS aliases, e.group_id AS group_id ORDER BY e.name",
                       user_id=user_id)


async def relations(store: Any, user_id: str) -> list[dict[str, Any]]:
    """Every edge, history included (invalid and expired ones too)."""
    return await _rows(store, "MATCH (s:Entity)-[r:RELATES {user_id: $user_id}]->(o:Entity) "
                              "RETURN r.id AS id, s.name AS source, r.predicate AS predicate, o.name AS target, "
                              "r.fact AS fact, r.valid_at AS valid_at, r.invalid_at AS invalid_at, "
                              "r.expired_at AS expired_at, r.memory_ids AS memory_ids, r.group_id AS group_id "
                              "ORDER BY source, predicate, target", user_id=user_id)


async def merge_copies(store: Any, user_id: str, entity_id: str) -> dict[str, int]:
    """Audit of a merge: how many edges of each type it copied onto the target (empty when not merged)."""
    rows = await _rows(store, "MATCH (s:Entity {id: $id}) WHERE s.user_id = $user_id "
                              "MATCH (t:Entity {id: coalesce(s.merged_into, '')})-[c]-() WHERE c.migrated_from = s.id "
                              "RETURN type(c) AS type, count(c) AS n", id=entity_id, user_id=user_id)
    return {str(r["type"]): int(r["n"]) for r in rows}


async def search_memories(store: Any, user_id: str, groups: list[str], query: str,
                          limit: int) -> list[tuple[str, float]]:
    """The graph retriever's proposal alone."""
    return list((await store.reads.propose_memories(user_id, groups, query, limit)).memories)
