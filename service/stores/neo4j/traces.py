"""Retrieval traces in the Neo4j graph store: `(:Trace {query, at, expires_at})-[:RETURNED {rank, score}]->(:Memory)`
and `-[:TOUCHED]->(:Entity)`; written after a search answered, read by id or by the entity they touched, purged
when expired. A trace carries the sensitivity ceiling it was searched under (ceiling.py `trace_visible`):
`TraceGraph`."""

from __future__ import annotations

from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from service.core.errors import NotFound
from service.core.sensitivity import Sensitivity, current
from service.stores.neo4j.ceiling import trace_visible
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import MAX_PAGE_LIMIT, check_id, clamp

WRITE_TRACE: LiteralString = """
CREATE (t:Trace {id: $id, user_id: $user_id, query: $text, at: $at, expires_at: $expires_at,
                 project_id: $project_id, max_sensitivity: $max_sensitivity})
WITH t
CALL (t) {
    UNWIND $returned AS hit
    MATCH (m:Memory {id: hit.memory_id}) WHERE m.user_id = $user_id
    CREATE (t)-[:RETURNED {rank: hit.rank, score: hit.score}]->(m)
}
CALL (t) {
    UNWIND $touched AS eid
    MATCH (e:Entity {id: eid}) WHERE e.user_id = $user_id
    CREATE (t)-[:TOUCHED]->(e)
}
RETURN t.id AS id
"""

TRACE: LiteralString = """
MATCH (t:Trace {id: $id}) WHERE t.user_id = $user_id AND t.expires_at > $now
CALL (t) {
    OPTIONAL MATCH (t)-[r:RETURNED]->(m:Memory)
    WITH r, m ORDER BY r.rank
    RETURN collect(CASE WHEN m IS NULL THEN null ELSE {memory_id: m.id, rank: r.rank, score: r.score} END) AS returned
}
CALL (t) {
    OPTIONAL MATCH (t)-[x:TOUCHED]->(e:Entity) WHERE x.migrated_from IS NULL
    WITH e ORDER BY e.name
    RETURN collect(CASE WHEN e IS NULL THEN null ELSE {entity_id: e.id, name: e.name} END) AS touched
}
RETURN t{.id, .user_id, .query, .at, .expires_at, .project_id, .max_sensitivity} AS trace, returned, touched
"""

TRACES_OF_ENTITY: LiteralString = """
MATCH (e:Entity {id: $entity_id}) WHERE e.user_id = $user_id
MATCH (t:Trace)-[:TOUCHED]->(e) WHERE t.expires_at > $now AND (t.at < $cursor OR $cursor = '')
WITH DISTINCT t ORDER BY t.at DESC, t.id LIMIT $limit
RETURN t{.id, .user_id, .query, .at, .expires_at, .project_id, .max_sensitivity} AS trace
"""

TRACES_OF_USER: LiteralString = """
MATCH (t:Trace {user_id: $user_id}) WHERE t.expires_at > $now AND (t.at < $cursor OR $cursor = '')
WITH t ORDER BY t.at DESC, t.id LIMIT $limit
RETURN t{.id, .user_id, .query, .at, .expires_at, .project_id, .max_sensitivity} AS trace
"""

PURGE_TRACES: LiteralString = """
MATCH (t:Trace) WHERE t.expires_at <= $now
WITH t LIMIT $batch
DETACH DELETE t
RETURN count(*) AS n
"""

ERASE_TRACES: LiteralString = """
MATCH (t:Trace {user_id: $user_id}) WHERE t.at <= $before
WITH t LIMIT $batch
DETACH DELETE t
RETURN count(*) AS n
"""

PURGE_BATCH = 1000


class TraceGraph:
    """Retrieval traces: written, read, purged, erased."""

    def __init__(self, executor: Neo4jExecutor) -> None:
        self._exec = executor

    async def write_trace(self, trace: dict[str, Any]) -> None:
        async def run(tx: AsyncManagedTransaction) -> None:
            params = {k: v for k, v in trace.items() if k != "query"}  # `query` is tx.run's own argument
            # the ceiling it was searched under: a reader with a lower one does not see it (its query, its hits)
            params.setdefault("max_sensitivity", (current() or Sensitivity.SECRET).value)
            await (await tx.run(WRITE_TRACE, text=trace["query"], **params)).consume()

        await self._exec.write(run)

    async def trace(self, user_id: str, trace_id: str, now: str) -> dict[str, Any]:
        check_id(trace_id, "trace id")

        async def run(tx: AsyncManagedTransaction) -> dict[str, Any] | None:
            rec = await (await tx.run(TRACE, id=trace_id, user_id=user_id, now=now)).single()
            if rec is None:
                return None
            return {**dict(rec["trace"]), "returned": list(rec["returned"]), "touched": list(rec["touched"])}

        found: dict[str, Any] | None = await self._exec.read(run)
        if found is None or not trace_visible(found):
            raise NotFound(f"trace {trace_id} not found (or expired)")
        return found

    async def traces_of_entity(self, user_id: str, entity_id: str | None, limit: int, cursor: str | None,
                               now: str) -> tuple[list[dict[str, Any]], str | None]:
        """Traces that touched the entity (every trace of the user without one), newest first; the cursor is
        the last trace's `at`."""
        check_id(user_id, "user_id")
        n = clamp(limit, MAX_PAGE_LIMIT)
        stmt = TRACES_OF_USER if entity_id is None else TRACES_OF_ENTITY

        async def run(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(stmt, entity_id=entity_id, user_id=user_id, now=now,
                                  cursor=cursor or "", limit=n + 1)
            return [dict(r["trace"]) for r in await result.data()]

        rows: list[dict[str, Any]] = await self._exec.read(run)
        more = len(rows) > n
        rows = rows[:n]
        return [r for r in rows if trace_visible(r)], (str(rows[-1]["at"]) if more and rows else None)

    async def purge_traces(self, now: str) -> int:
        """Remove expired traces (batches of PURGE_BATCH, bounded). Returns how many."""
        async def run(tx: AsyncManagedTransaction) -> int:
            rec = await (await tx.run(PURGE_TRACES, now=now, batch=PURGE_BATCH)).single()
            return int(rec["n"]) if rec else 0

        return await self._batches(run)

    async def erase_traces(self, user_id: str, before: str) -> int:
        """A delete of everything of the user: every trace of theirs (its query text) recorded up to `before`."""
        check_id(user_id, "user_id")

        async def run(tx: AsyncManagedTransaction) -> int:
            rec = await (await tx.run(ERASE_TRACES, user_id=user_id, before=before, batch=PURGE_BATCH)).single()
            return int(rec["n"]) if rec else 0

        return await self._batches(run)

    async def _batches(self, run: Any) -> int:
        total = 0
        for _ in range(10_000):  # bounded
            n: int = await self._exec.write(run)
            total += n
            if n < PURGE_BATCH:
                break
        return total
