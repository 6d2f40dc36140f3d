"""Neo4j backend of the GraphStore Protocol (async driver, `execute_write`/`execute_read`). The statements are
in cypher.py, rows and ids in rows.py, full-text search helpers in search.py."""

from __future__ import annotations

import asyncio
from typing import Any, LiteralString

import structlog
from neo4j import (
    READ_ACCESS,
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    NotificationDisabledClassification,
)
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, TransientError

from service.domain import Memory
from service.errors import DependencyUnavailable, DomainError
from service.stores.graph import SINGLE_VALUED_PREDICATES, MemoryLinks, NameRules
from service.stores.neo4j import cypher, resolution
from service.stores.neo4j.conversations import CONVERSATION_SCHEMA, ConversationGraph
from service.stores.neo4j.curation import GraphCuration
from service.stores.neo4j.reads import GraphReads
from service.stores.neo4j.resolution import MissingNameVectors, resolve
from service.stores.neo4j.rows import (
    MAX_ALIASES,
    REMOVE_BATCH,
    check_id,
    entity_name,
    ft_key,
    iso_utc,
    link_rows,
    memory_row,
    utc_now,
)
from service.stores.neo4j.runs import RUN_SCHEMA, RunGraph

log = structlog.get_logger(__name__)
MAX_VECTOR_ROUNDS = 3  # transactions of one link write that may find candidates without name vectors
_QUIET_READS = [NotificationDisabledClassification.UNRECOGNIZED]


async def apply_links(tx: AsyncManagedTransaction, graph: dict[str, list[dict[str, Any]]], now: str,
                      names: NameRules, vectors: dict[str, list[float]]) -> None:
    """Resolve the new entities (when the rules have a gate), MERGE entities, mentions and relations, then let
    single-valued facts replace older ones."""
    if names.resolves and graph["entities"]:
        await resolve(tx, names, graph, now, vectors)
    if graph["entities"]:
        await (await tx.run(cypher.UPSERT_ENTITIES, rows=graph["entities"], max_aliases=MAX_ALIASES)).consume()
    if graph.get("same_as"):
        await (await tx.run(resolution.SAME_AS, rows=graph["same_as"])).consume()
    if graph["mentions"]:
        await (await tx.run(cypher.UPSERT_MENTIONS, rows=graph["mentions"])).consume()
    if graph["relations"]:
        await (await tx.run(cypher.UPSERT_RELATIONS, rows=graph["relations"])).consume()
    single = sorted(
        ({"source_id": r["source_id"], "id": r["id"], "valid_at": str(r["valid_at"])} for r in graph["relations"]
         if r["predicate"] in SINGLE_VALUED_PREDICATES),
        key=lambda r: r["valid_at"],
    )
    if single:  # oldest first, one round trip
        await (await tx.run(cypher.SUPERSEDE, rows=single, now=now)).consume()



class Neo4jGraphStore(GraphReads, GraphCuration, RunGraph, ConversationGraph):
    name = "neo4j"

    def __init__(self, uri: str, user: str, password: str | None, database: str, timeout: float,
                 names: NameRules) -> None:
        auth = (user, password) if password else None
        self._driver: AsyncDriver = AsyncGraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=timeout,
            connection_acquisition_timeout=timeout,
            max_transaction_retry_time=timeout,
            # "property key does not exist" on a fresh graph (merged_into before any merge) is not news
            notifications_disabled_classifications=["UNRECOGNIZED"],
        )
        self._db = database
        self._timeout = timeout
        self._names = names  # how entity names compare; with a gate, new entities are resolved
        self.transient_retries = 0  # transaction functions the driver re-ran on a transient error
        self.deadlock_retries = 0  # ... of which on DeadlockDetected

    async def _write(self, fn: Any, **params: Any) -> Any:
        async def counted(tx: AsyncManagedTransaction, /, **kw: Any) -> Any:
            try:
                return await fn(tx, **kw)
            except TransientError as exc:  # the driver retries the function; we count why
                self.transient_retries += 1
                if "Deadlock" in (exc.code or ""):
                    self.deadlock_retries += 1
                raise

        try:
            async with asyncio.timeout(self._timeout * 6):
                async with self._driver.session(database=self._db) as session:
                    return await session.execute_write(counted, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            if "MemoryPoolOutOfMemoryError" in (exc.code or ""):
                raise  # remove_memories halves its batch on this one
            raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc

    async def _read(self, fn: Any, **params: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                # No "unrecognized" notifications (a property no node has yet, like deleted_at before the first
                # delete): the service would log each one, with the statement, on every search.
                async with self._driver.session(database=self._db,
                                                notifications_disabled_classifications=_QUIET_READS) as session:
                    return await session.execute_read(fn, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc

    async def _read_one(self, stmt: LiteralString, **params: Any) -> list[tuple[Any, ...]]:
        """One read statement in an auto-commit transaction: one round trip (RUN and PULL pipelined), where a
        managed transaction adds BEGIN and COMMIT (2-3 ms at p50 here). No retry on a transient error: for the
        search's graph retriever that is a degraded answer, not a longer wait. Same errors as `_read`."""
        try:
            async with asyncio.timeout(self._timeout):
                async with self._driver.session(database=self._db, default_access_mode=READ_ACCESS,
                                                notifications_disabled_classifications=_QUIET_READS) as session:
                    result = await session.run(stmt, **params)
                    return [tuple(record.values()) async for record in result]
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            raise DependencyUnavailable(f"neo4j transient error: {exc.code}") from exc

    async def ensure_schema(self) -> None:
        async def run(tx: AsyncManagedTransaction, stmt: LiteralString) -> None:
            await (await tx.run(stmt)).consume()

        for stmt in cypher.SCHEMA + (resolution.schema(self._names.dim) if self._names.resolves else ()) \
                + RUN_SCHEMA + CONVERSATION_SCHEMA:
            try:
                await self._write(run, stmt=stmt)
            except Neo4jError as exc:  # an equivalent index under another name is fine
                if "EquivalentSchemaRule" not in (exc.code or ""):
                    raise
        await self._backfill()

        async def wait(tx: AsyncManagedTransaction, seconds: int) -> None:
            await (await tx.run("CALL db.awaitIndexes($seconds)", seconds=seconds)).consume()

        # full-text indexes populate asynchronously; reads right after start need them online
        try:
            await self._write(wait, seconds=int(self._timeout * 5))
        except Neo4jError as exc:  # a big store may take longer: searches fail until it is online
            log.warning("graph_indexes_not_online_yet", error=str(exc))
        log.info("graph_schema_ready", statements=len(cypher.SCHEMA))

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
                if await self._write(batch, find=find, fill=fill) == 0:
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
            if await self._write(keys) == 0:
                break

        async def legacy_users(tx: AsyncManagedTransaction) -> list[str | None]:
            return [r["user_id"] for r in await (await tx.run(cypher.LEGACY_MEMORY_USERS)).data()]

        async def edge_ids(tx: AsyncManagedTransaction, user_id: str | None) -> None:
            await (await tx.run(cypher.BACKFILL_EDGE_IDS, user_id=user_id)).consume()

        for _ in range(10_000):
            users: list[str | None] = await self._write(legacy_users)
            if not users:
                break
            for u in users:
                if u is None:  # no user: nothing can reference it; mark it done
                    await self._write(self._mark_orphans)
                else:
                    await self._write(edge_ids, user_id=u)

    @staticmethod
    async def _mark_orphans(tx: AsyncManagedTransaction) -> None:
        await (await tx.run("MATCH (m:Memory) WHERE m.user_id IS NULL AND m.edge_ids IS NULL "
                            "SET m.edge_ids = []")).consume()

    # ---- writes ---------------------------------------------------------------------------

    async def _link_write(self, links_of: Any, body: Any) -> Any:
        """`body(tx, graph, vectors)` in one write transaction, `graph` fresh from `links_of()` each time. The
        entity names are embedded before the transaction; names of candidates the transaction found without a
        vector of this embedder are embedded after it rolled back, and it runs again."""
        vectors: dict[str, list[float]] = {}
        for _ in range(MAX_VECTOR_ROUNDS):
            graph = links_of()
            if self._names.resolves:
                wanted = [r["name"] for r in graph["entities"] if self._names.name_key(r["name"]) not in vectors]
                vectors |= await self._names.vectors(wanted) if wanted else {}

            async def run(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]) -> Any:
                return await body(tx, graph, vectors)

            try:
                return await self._write(run, graph=graph, vectors=vectors)
            except MissingNameVectors as exc:
                vectors |= await self._names.vectors(exc.names)
        raise DependencyUnavailable("neo4j write: candidates kept arriving without name vectors")

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None) -> None:
        now = utc_now()
        rows = sorted((memory_row(m) for m in memories), key=lambda r: str(r["id"]))

        async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]) -> None:
            await (await tx.run(cypher.UPSERT_MEMORIES, rows=rows)).consume()
            await apply_links(tx, graph, now, self._names, vectors)

        await self._link_write(lambda: link_rows(memories, links or [], self._names), body)

    async def replace_memory(self, memory: Memory, links: MemoryLinks, now: str) -> list[str]:
        if links.memory_id != memory.id:
            raise DomainError("links belong to another memory")
        now = iso_utc(now) or utc_now()

        def links_of() -> dict[str, Any]:
            return link_rows([memory], [links], self._names, default_valid_at=now)

        graph = links_of()
        keep = sorted({r["id"] for r in graph["relations"]})
        keys = sorted({(r["source_id"], r["predicate"]) for r in graph["relations"]
                       if r["predicate"] in SINGLE_VALUED_PREDICATES})

        async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]
                       ) -> list[str]:
            await (await tx.run(cypher.UPSERT_MEMORIES, rows=[memory_row(memory)])).consume()
            await (await tx.run(cypher.DROP_SUPPORT, memory_ids=[memory.id], memory_id=memory.id, keep=keep,
                                now=now)).consume()
            await apply_links(tx, graph, now, self._names, vectors)
            result = await tx.run(cypher.INVALIDATED_BY, memory_ids=[memory.id], memory_id=memory.id, now=now,
                                  keys=[list(k) for k in keys])
            return [str(r["id"]) for r in await result.data()]

        invalidated: list[str] = await self._link_write(links_of, body)
        return invalidated

    async def remove_memories(
        self, memory_ids: list[str], now: str, duplicate_of: dict[str, str] | None = None, *,
        user_id: str | None = None, erase: bool = False,
    ) -> list[str]:
        now = iso_utc(now) or utc_now()
        ids = list(dict.fromkeys(check_id(i, "memory id") for i in memory_ids))
        dups = {check_id(k, "memory id"): check_id(v, "memory id") for k, v in (duplicate_of or {}).items()}

        async def run(tx: AsyncManagedTransaction, chunk: list[str]) -> list[str]:
            rows = [{"id": i, "duplicate_of": dups.get(i), "user_id": user_id} for i in chunk]
            chunk_dups = {i: dups[i] for i in chunk if i in dups}
            await (await tx.run(cypher.MARK_REMOVED, rows=rows, now=now)).consume()
            await (await tx.run(cypher.DROP_REMOVED, memory_ids=chunk, dups=chunk_dups, now=now)).consume()
            if chunk_dups:
                await (await tx.run(cypher.ADOPT_EDGES, dups=chunk_dups)).consume()
            result = await tx.run(cypher.EXPIRED_BY, memory_ids=chunk, now=now)
            expired = [str(r["id"]) for r in await result.data()]
            if erase:
                await (await tx.run(cypher.ERASE_FACTS, memory_ids=chunk)).consume()
                await (await tx.run(cypher.ERASE_REMOVED, memory_ids=chunk)).consume()
            return expired

        async def remove(chunk: list[str]) -> list[str]:
            try:
                done: list[str] = await self._write(run, chunk=chunk)
                return done
            except TransientError as exc:  # too many edges for one transaction: halve (idempotent)
                if "MemoryPoolOutOfMemoryError" not in (exc.code or "") or len(chunk) == 1:
                    raise
                half = len(chunk) // 2
                return await remove(chunk[:half]) + await remove(chunk[half:])

        expired: list[str] = []
        for start in range(0, len(ids), REMOVE_BATCH):
            expired += await remove(ids[start : start + REMOVE_BATCH])
        return sorted(set(expired))

    async def import_graph(self, user_id: str, memories: list[Memory], entities: list[dict[str, Any]],
                           mentions: list[dict[str, str]], facts: list[dict[str, Any]]) -> None:
        check_id(user_id, "user_id")
        memory_rows = [memory_row(m) for m in memories if m.user_id == user_id]
        ent_rows = [{**e, "name_lc": entity_name(str(e["name"])).casefold(),
                     "ft_key": ft_key(user_id, str(e["group_id"])),
                     "keys": sorted({*self._names.keys_of([str(e["name"]), *e["aliases"]]), *e.get("keys", [])}),
                     "identity": e.get("identity", {})} for e in entities]
        fact_rows = [{**f, "ft_key": ft_key(user_id, str(f["group_id"]))} for f in facts]

        async def run(tx: AsyncManagedTransaction) -> None:
            if ent_rows:
                await (await tx.run(cypher.IMPORT_ENTITIES, rows=ent_rows, user_id=user_id)).consume()
            if memory_rows:
                await (await tx.run(cypher.IMPORT_MEMORIES, rows=memory_rows)).consume()
            if mentions:
                await (await tx.run(cypher.UPSERT_MENTIONS, rows=mentions)).consume()
            if fact_rows:
                await (await tx.run(cypher.IMPORT_FACTS, rows=fact_rows, user_id=user_id)).consume()

        await self._write(run)

    async def ping(self) -> None:
        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run("RETURN 1")).consume()

        await self._read(run)

    async def close(self) -> None:
        await self._driver.close()
