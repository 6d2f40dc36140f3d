"""Entity hits for one chat-turn payload (`POST /v1/search` with `include: ["entities"]`): the entities a query names
(the graph retriever's own matching: full text over names and aliases, and the whole query as an exact name), each
with its score, how many memories mention it and the names of the entities its live facts relate it to
(`TurnGraph`, the `EntitySearch` part)."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.stores.neo4j.ceiling import Ceiling
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import check_groups, check_id, clamp, ft_key
from service.stores.neo4j.search import entity_hits, lucene_terms

MAX_ENTITY_HITS = 20
MAX_RELATED = 10

ENTITY_DETAILS: LiteralString = """
UNWIND $ids AS id
MATCH (e:Entity {id: id}) WHERE e.user_id = $user_id
RETURN e.id AS id, e.name AS name, e.type AS type, e.group_id AS group_id, coalesce(e.aliases, []) AS aliases,
       COUNT { (e)<-[:MENTIONS]-(:Memory) } AS mentions,
       COLLECT { MATCH (e)-[r:RELATES]-(o:Entity)
                 WHERE r.invalid_at IS NULL AND r.expired_at IS NULL AND o.merged_into IS NULL
                 WITH DISTINCT o.name AS n ORDER BY n LIMIT $related RETURN n } AS related
"""


class TurnGraph:
    """Entity search (`EntitySearch`)."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor
        self._ceiling = Ceiling(executor)

    async def search_entities(self, user_id: str, groups: list[str], query: str, limit: int
                              ) -> list[dict[str, Any]]:
        check_id(user_id, "user_id")
        checked = check_groups(groups) or []
        if not checked:
            return []
        terms = lucene_terms(query)
        keys = [ft_key(user_id, g) for g in checked]
        common: dict[str, Any] = {"user_id": user_id, "groups": checked, "history": False}
        n = clamp(limit, MAX_ENTITY_HITS)

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            hits = await entity_hits(tx, query, terms, keys, common)
            best = sorted(hits, key=lambda h: (-hits[h], h))[:n]
            if not best:
                return []
            rows = {str(r["id"]): dict(r) for r in
                    await (await tx.run(ENTITY_DETAILS, ids=best, user_id=user_id, related=MAX_RELATED)).data()}
            return [{**rows[h], "score": round(hits[h], 6)} for h in best if h in rows]

        found: list[dict[str, Any]] = await self._exec.read(run)
        return await self._ceiling.keep_entity_hits(user_id, found)
