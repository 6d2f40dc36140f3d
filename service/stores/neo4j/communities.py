"""Entity communities (docs/graph.md): the user's live relations read for grouping, the groups written as
(:Community)-[:HAS_MEMBER {rank}]->(:Entity), and listed (`CommunityGraph`, the `CommunityStore` part).

Communities are derived data, rebuilt from the relations by a run (service/graph_api/communities.py); a run
replaces the user's communities in one transaction. Members are edges to the entities, so an entity a delete
erases leaves its communities with it; a community left with fewer than two live members is not listed."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.neo4j.ceiling import Ceiling
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import MAX_PAGE_LIMIT, check_id, clamp, offset_of

# The live relations between live entities (index on the relation's user); a merge's copies live on its target.
_RELATIONS: LiteralString = """
MATCH (s:Entity)-[r:RELATES]->(o:Entity)
WHERE r.user_id = $user_id AND r.invalid_at IS NULL AND r.expired_at IS NULL AND r.fact IS NOT NULL
  AND s.merged_into IS NULL AND o.merged_into IS NULL AND s <> o
RETURN s.id AS source, o.id AS target, r.predicate AS predicate, r.fact AS fact,
       s{.id, .name, .type} AS s, o{.id, .name, .type} AS o
LIMIT $limit
"""

_DROP: LiteralString = """
MATCH (c:Community {user_id: $user_id}) WHERE NOT c.id IN $keep
DETACH DELETE c
"""

_UPSERT: LiteralString = """
UNWIND $rows AS row
MERGE (c:Community {id: row.id})
SET c.user_id = $user_id, c.size = row.size, c.predicates = row.predicates, c.summary = row.summary,
    c.summary_source = row.summary_source, c.updated_at = $now
WITH c
OPTIONAL MATCH (c)-[h:HAS_MEMBER]->()
DELETE h
"""

_MEMBERS: LiteralString = """
UNWIND $rows AS row
MATCH (c:Community {id: row.id})
UNWIND row.members AS m
MATCH (e:Entity {id: m.id})
MERGE (c)-[h:HAS_MEMBER]->(e)
SET h.rank = m.rank
"""

_LIST: LiteralString = """
MATCH (c:Community) WHERE c.user_id = $user_id
CALL (c) {
    MATCH (c)-[h:HAS_MEMBER]->(e:Entity) WHERE e.merged_into IS NULL
    WITH h, e ORDER BY h.rank
    RETURN collect(e{.id, .name, .type}) AS members
}
WITH c, members WHERE size(members) >= 2
ORDER BY size(members) DESC, c.id
SKIP $offset LIMIT $limit
RETURN c{.id, .predicates, .summary, .summary_source, .updated_at} AS community, members
"""


# The communities any of these entities belongs to, most matched members first.
_OF_ENTITIES: LiteralString = """
UNWIND $ids AS id
MATCH (c:Community)-[:HAS_MEMBER]->(:Entity {id: id})
WHERE c.user_id = $user_id
WITH c, count(*) AS matched
CALL (c) {
    MATCH (c)-[h:HAS_MEMBER]->(e:Entity) WHERE e.merged_into IS NULL
    WITH h, e ORDER BY h.rank
    RETURN collect(e{.id, .name, .type}) AS members
}
WITH c, matched, members WHERE size(members) >= 2
ORDER BY matched DESC, size(members) DESC, c.id
LIMIT $limit
RETURN c{.id, .predicates, .summary, .summary_source, .updated_at} AS community, members
"""


class CommunityGraph:
    """Community reads and writes (`CommunityStore`)."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor
        self._ceiling = Ceiling(executor)

    async def live_relations(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            return await (await tx.run(_RELATIONS, user_id=user_id, limit=int(limit))).data()

        rows: list[dict[str, Any]] = await self._exec.read(run)
        return rows

    async def replace_communities(self, user_id: str, communities: list[dict[str, Any]], now: str) -> None:
        check_id(user_id, "user_id")
        keep = [str(c["id"]) for c in communities]

        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run(_DROP, user_id=user_id, keep=keep)).consume()
            if communities:
                await (await tx.run(_UPSERT, rows=communities, user_id=user_id, now=now)).consume()
                await (await tx.run(_MEMBERS, rows=communities)).consume()

        await self._exec.write(run, slow=False)

    async def list_communities(self, user_id: str, limit: int, cursor: str | None
                               ) -> tuple[list[dict[str, Any]], str | None]:
        check_id(user_id, "user_id")
        limit = clamp(limit, MAX_PAGE_LIMIT)
        offset = offset_of(cursor)

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            return await (await tx.run(_LIST, user_id=user_id, offset=offset, limit=limit + 1)).data()

        rows: list[dict[str, Any]] = await self._exec.read(run)
        return await self._ceiling.keep_communities(rows[:limit]), str(offset + limit) if len(rows) > limit else None

    async def communities_of(self, user_id: str, entity_ids: list[str], limit: int) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")
        ids = [check_id(i, "entity id") for i in entity_ids[:100]]

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            return await (await tx.run(_OF_ENTITIES, user_id=user_id, ids=ids, limit=clamp(limit, 50))).data()

        rows: list[dict[str, Any]] = await self._exec.read(run) if ids else []
        return await self._ceiling.keep_communities(rows)
