"""The graph's schema (constraints, indexes, full-text indexes) and what start-up does to a graph written by an
older version: backfills of keys and edge ids, the relation-key migration. `GraphSchema.ensure_schema` runs
every tier's statements (ddl.py, and resolution.py's vector indexes) whose index or constraint the graph does not
have yet, and waits for the indexes."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import LiteralString

import structlog
from neo4j import AsyncManagedTransaction
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable

from service.core.errors import DependencyUnavailable
from service.stores.graph import EntityNameRules
from service.stores.neo4j import resolution
from service.stores.neo4j.ddl import COMMUNITY_SCHEMA, CONVERSATION_SCHEMA, RUN_SCHEMA, SCHEMA
from service.stores.neo4j.executor import Neo4jExecutor
from service.stores.neo4j.rows import ft_key

log = structlog.get_logger(__name__)
MIGRATION_BATCH = 2000  # relationships per transaction of the start-up migration
MIGRATION_SECONDS = 3600  # the start-up migration's deadline (a no-op pass reads each relationship once)


SCHEMA_NAMES: tuple[LiteralString, ...] = ("SHOW INDEXES YIELD name RETURN name",
                                           "SHOW CONSTRAINTS YIELD name RETURN name")  # SHOW does not UNION
_NAMED = re.compile(r"^\s*CREATE (?:FULLTEXT |VECTOR )?(?:INDEX|CONSTRAINT) (\w+) IF NOT EXISTS ")


def statement_name(stmt: str) -> str | None:
    """The index or constraint a schema statement creates (every statement names one), else None: run it."""
    found = _NAMED.match(stmt)
    return found.group(1) if found else None


LEGACY_MEMORY_USERS: LiteralString = """
MATCH (m:Memory) WHERE m.edge_ids IS NULL
RETURN DISTINCT m.user_id AS user_id LIMIT 100
"""

# One pass over the user's edges (index on RELATES.user_id), grouped by supporting memory.
BACKFILL_EDGE_IDS: LiteralString = """
CALL () {
    MATCH ()-[r:RELATES]->() WHERE r.user_id = $user_id
    UNWIND r.memory_ids + coalesce(r.former_memory_ids, []) AS mid
    WITH mid, collect(DISTINCT r.id) AS eids
    MATCH (m:Memory {id: mid}) WHERE m.edge_ids IS NULL
    SET m.edge_ids = eids
}
MATCH (m:Memory {user_id: $user_id}) WHERE m.edge_ids IS NULL
SET m.edge_ids = []
"""

# Relations written before keys and slots: the original edge of each id gets `key` (a second edge with
# the same id, which only a race of two writers could have made, gets a key no write looks up), live edges get
# `slot`. One pass over the relationships, committed in batches (CALL ... IN TRANSACTIONS: an auto-commit
# statement); a no-op pass over a migrated graph reads each relationship once.
MIGRATE_RELATION_KEYS: LiteralString = """
MATCH ()-[r:RELATES]->()
WHERE (r.key IS NULL AND r.migrated_from IS NULL)
   OR (r.slot IS NULL AND r.invalid_at IS NULL AND r.expired_at IS NULL)
CALL (r) {
    WITH r, startNode(r) AS s
    SET r.key = CASE WHEN r.key IS NOT NULL OR r.migrated_from IS NOT NULL THEN r.key
                     WHEN EXISTS { MATCH ()-[x:RELATES {key: r.id}]->() } THEN r.id + '|dup|' + elementId(r)
                     ELSE r.id END,
        r.slot = CASE WHEN r.invalid_at IS NULL AND r.expired_at IS NULL THEN s.id + '|' + r.predicate
                      ELSE r.slot END
} IN TRANSACTIONS OF $batch ROWS
RETURN count(*) AS migrated
"""


class GraphSchema:
    """The schema and the start-up migrations. `names`: the name vector index (with a gate) and entity keys;
    `warm`: the write path's warm-up, run once the schema is ready (memories.py `warm_write_plans`)."""

    def __init__(self, executor: Neo4jExecutor, names: EntityNameRules, warm: Callable[[], Awaitable[object]]
                 ) -> None:
        self._exec = executor
        self._names = names
        self._warm = warm

    async def ensure_schema(self) -> None:
        async def run(tx: AsyncManagedTransaction, stmt: LiteralString) -> None:
            await (await tx.run(stmt)).consume()

        async def names(tx: AsyncManagedTransaction) -> set[str]:
            return {r["name"] for show in SCHEMA_NAMES for r in await (await tx.run(show)).data()}

        # A started graph has them all: one read instead of a schema transaction per statement (each costs Neo4j
        # a plan and a lock at every start of every process). A statement runs when its name is not there yet.
        existing = await self._exec.read(names)
        created = 0
        for stmt in SCHEMA + (resolution.schema(self._names.dim) if self._names.resolves else ()) \
                + RUN_SCHEMA + CONVERSATION_SCHEMA + COMMUNITY_SCHEMA:
            if statement_name(stmt) in existing:
                continue
            created += 1
            try:
                await self._exec.write(run, stmt=stmt)
            except Neo4jError as exc:  # an equivalent index under another name is fine
                if "EquivalentSchemaRule" not in (exc.code or ""):
                    raise
        await self._backfill()
        await self._migrate_relation_keys()

        async def wait(tx: AsyncManagedTransaction, seconds: int) -> None:
            await (await tx.run("CALL db.awaitIndexes($seconds)", seconds=seconds)).consume()

        # full-text indexes populate asynchronously; reads right after start need them online
        try:
            await self._exec.write(wait, seconds=int(self._exec.timeout * 5))
        except Neo4jError as exc:  # a big store may take longer: searches fail until it is online
            log.warning("graph_indexes_not_online_yet", error=str(exc))
        await self._warm()
        log.info("graph_schema_ready", statements=len(SCHEMA), created=created)

    async def _backfill(self) -> None:
        """Entities and edges written before `ft_key` existed get it, memories before `edge_ids`
        existed get theirs (no-op once done)."""
        select: tuple[tuple[LiteralString, LiteralString], ...] = (
            ("MATCH (e:Entity) WHERE e.ft_key IS NULL "
             "RETURN e.id AS id, coalesce(e.user_id, '') AS user_id, coalesce(e.group_id, '') AS group_id LIMIT 5000",
             "UNWIND $rows AS row MATCH (e:Entity {id: row.id}) SET e.ft_key = row.key"),
            ("MATCH ()-[r:RELATES]->() WHERE r.ft_key IS NULL "
             "RETURN r.id AS id, coalesce(r.user_id, '') AS user_id, coalesce(r.group_id, '') AS group_id LIMIT 5000",
             "UNWIND $rows AS row MATCH ()-[r:RELATES {id: row.id}]->() WHERE r.ft_key IS NULL SET r.ft_key = row.key"),
        )

        async def batch(tx: AsyncManagedTransaction, find: LiteralString, fill: LiteralString) -> int:
            rows = await (await tx.run(find)).data()
            keyed = [{"id": r["id"], "key": ft_key(r["user_id"], r["group_id"])} for r in rows]
            if keyed:
                await (await tx.run(fill, rows=keyed)).consume()
            return len(keyed)

        for find, fill in select:
            for _ in range(10_000):
                if await self._exec.write(batch, find=find, fill=fill) == 0:
                    break

        async def keys(tx: AsyncManagedTransaction) -> int:  # entities written before the resolution gate
            rows = await (await tx.run("MATCH (e:Entity) WHERE e.keys IS NULL "
                                       "RETURN e.id AS id, e.name AS name, e.aliases AS aliases LIMIT 5000")).data()
            keyed = [{"id": r["id"], "keys": self._names.keys_of([r["name"] or "", *(r["aliases"] or [])])}
                     for r in rows]
            if keyed:
                await (await tx.run("UNWIND $rows AS row MATCH (e:Entity {id: row.id}) SET e.keys = row.keys",
                                    rows=keyed)).consume()
            return len(keyed)

        for _ in range(10_000):
            if await self._exec.write(keys) == 0:
                break

        async def legacy_users(tx: AsyncManagedTransaction) -> list[str | None]:
            return [r["user_id"] for r in await (await tx.run(LEGACY_MEMORY_USERS)).data()]

        async def edge_ids(tx: AsyncManagedTransaction, user_id: str | None) -> None:
            await (await tx.run(BACKFILL_EDGE_IDS, user_id=user_id)).consume()

        for _ in range(10_000):
            users: list[str | None] = await self._exec.write(legacy_users)
            if not users:
                break
            for u in users:
                if u is None:  # no user: nothing can reference it; mark it done
                    await self._exec.write(self._mark_orphans)
                else:
                    await self._exec.write(edge_ids, user_id=u)

    async def _migrate_relation_keys(self) -> None:
        """Relations written before keys and slots get them (MIGRATE_RELATION_KEYS; docs/decisions.md,
        "Relation keys"). Idempotent; an auto-commit statement, since it commits in batches itself."""
        started = time.perf_counter()
        record = None
        for attempt in range(3):  # two processes starting together may both key a legacy duplicate: run again
            try:
                async with asyncio.timeout(MIGRATION_SECONDS):
                    async with self._exec.session() as session:
                        result = await session.run(MIGRATE_RELATION_KEYS, batch=MIGRATION_BATCH)
                        record = await result.single()
                break
            except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
                raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
            except Neo4jError as exc:
                if attempt == 2:
                    raise
                log.warning("graph_relation_keys_migration_retry", error=f"{exc.code}: {exc.message}"[:300])
                await asyncio.sleep(1 + attempt)
        migrated = int(record["migrated"]) if record else 0
        if migrated:
            log.info("graph_relation_keys_migrated", relations=migrated,
                     seconds=round(time.perf_counter() - started, 1))

    @staticmethod
    async def _mark_orphans(tx: AsyncManagedTransaction) -> None:
        await (await tx.run("MATCH (m:Memory) WHERE m.user_id IS NULL AND m.edge_ids IS NULL "
                            "SET m.edge_ids = []")).consume()
