"""Neo4j backend of the GraphStore Protocol (async driver, `execute_write`/`execute_read`). The statements are
in cypher_writes.py, rows and ids in rows.py, full-text search helpers in search.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, LiteralString, TypeVar

import structlog
from neo4j import (
    READ_ACCESS,
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    NotificationDisabledClassification,
    unit_of_work,
)
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, TransientError

from service.core.domain import Memory, Scope, content_hash
from service.core.errors import DependencyUnavailable, DomainError
from service.stores.graph import SINGLE_VALUED_PREDICATES, EntityNameRules, EntityRef, MemoryLinks, RelationRef
from service.stores.neo4j import cypher_portability, cypher_writes, facts, resolution
from service.stores.neo4j.chunks import ChunkSizer, ChunkStats, ChunkTooSlow, write_chunked
from service.stores.neo4j.communities import CommunityGraph
from service.stores.neo4j.console import ConsoleGraph
from service.stores.neo4j.conversations import ConversationGraph
from service.stores.neo4j.curation import GraphCuration
from service.stores.neo4j.facts import FactGraph
from service.stores.neo4j.reads import GraphReads
from service.stores.neo4j.resolution import MissingNameVectors, resolve
from service.stores.neo4j.rows import (
    MAX_ALIASES,
    MAX_ROLES,
    check_id,
    entity_name,
    ft_key,
    iso_utc,
    link_rows,
    memory_row,
    utc_now,
)
from service.stores.neo4j.run_reads import RunReads
from service.stores.neo4j.runs import RunGraph
from service.stores.neo4j.schema import GraphSchema
from service.stores.neo4j.traces import TraceGraph
from service.stores.neo4j.turn import TurnGraph
from service.stores.reports import GraphReport

log = structlog.get_logger(__name__)
_T = TypeVar("_T")
_R = TypeVar("_R")
MAX_VECTOR_ROUNDS = 3  # transactions of one link write that may find candidates without name vectors
_QUIET_READS = [NotificationDisabledClassification.UNRECOGNIZED]
# Bulk writes: the first chunk of each one, by kind (memories, rows, ids per transaction); sizes then follow
# the measured rate so that a chunk takes about a tenth of the write deadline (chunks.py). An upsert's first
# chunk is small: a fresh user's memories (every name new: embedded, checked by the gate) cost ~0.1 s each
# on a busy 2-core machine.
FIRST_CHUNK = {"upsert": 16, "remove": 100, "import": 500, "identity": 50}


def _server_slow(exc: Neo4jError) -> bool:
    """Neo4j ended the transaction for its time (the timeout this client set) or its memory."""
    code = exc.code or ""
    return "TransactionTimedOut" in code or "Transaction.Terminated" in code or "MemoryPoolOutOfMemoryError" in code


def supersede_rows(relations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SUPERSEDE's rows: the single-valued relations, oldest first, each with its slot (`<source id>|<predicate>`,
    the property by which the live edges of one subject and predicate are found)."""
    return sorted(
        ({"source_id": r["source_id"], "id": r["id"], "valid_at": str(r["valid_at"]),
          "slot": f"{r['source_id']}|{r['predicate']}"} for r in relations
         if r["predicate"] in SINGLE_VALUED_PREDICATES),
        key=lambda r: r["valid_at"],
    )


async def apply_links(tx: AsyncManagedTransaction, graph: dict[str, list[dict[str, Any]]], now: str,
                      names: EntityNameRules, vectors: dict[str, list[float]]) -> GraphReport:
    """Resolve the new entities (when the rules have a gate), MERGE entities, mentions and relations, then let
    single-valued facts replace older ones. Returns what it did per memory (facts.py, `report`)."""
    origin = {r["id"]: (r["name"], r["type"]) for r in graph["entities"]}
    named = [(m["memory_id"], m["entity_id"]) for m in graph["mentions"]]
    if names.resolves and graph["entities"]:
        await resolve(tx, names, graph, now, vectors)
    elif graph["entities"]:
        graph["decided"] = await facts.decided_without_gate(tx, list(origin))
    if graph["entities"]:
        await (await tx.run(cypher_writes.UPSERT_ENTITIES, rows=graph["entities"], max_aliases=MAX_ALIASES,
                            max_roles=MAX_ROLES)).consume()
    if graph.get("same_as"):
        await (await tx.run(resolution.SAME_AS, rows=graph["same_as"])).consume()
    if graph["mentions"]:
        await (await tx.run(cypher_writes.UPSERT_MENTIONS, rows=graph["mentions"])).consume()
    if graph["relations"]:
        await (await tx.run(cypher_writes.UPSERT_RELATIONS, rows=graph["relations"])).consume()
    single = supersede_rows(graph["relations"])
    if single:  # oldest first, one round trip
        await (await tx.run(cypher_writes.SUPERSEDE, rows=single, now=now)).consume()
    return await facts.finish_links(tx, graph, origin, named)



async def write_memories(tx: AsyncManagedTransaction, rows: list[dict[str, Any]],
                         graph: dict[str, list[dict[str, Any]]], now: str, names: EntityNameRules,
                         vectors: dict[str, list[float]]) -> GraphReport:
    """The memories' nodes, then their links (`apply_links`): one chunk of `upsert_memories`."""
    await (await tx.run(cypher_writes.UPSERT_MEMORIES, rows=rows)).consume()
    return await apply_links(tx, graph, now, names, vectors)


class _RolledBack(Exception):
    """Raised by a transaction function to roll its transaction back (`_warm_write_plans`)."""


class Neo4jGraphStore(GraphSchema, GraphReads, GraphCuration, TraceGraph, RunGraph, RunReads, ConversationGraph,
                      TurnGraph, FactGraph, CommunityGraph, ConsoleGraph):
    name = "neo4j"

    def __init__(self, uri: str, user: str, password: str | None, database: str, timeout: float,
                 names: EntityNameRules) -> None:
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
        self._sizers: dict[str, ChunkSizer] = {}  # bulk write chunk sizes, by kind (chunks.py)
        self.chunk_stats = ChunkStats()

    async def _warm_write_plans(self) -> GraphReport:
        """The write path's statements, planned before the first write. A fresh server plans each statement the
        first time it sees it, on a cold JVM: several seconds for a write's dozen statements, which the first
        write would pay inside its transaction. One synthetic memory (two new entities, a single-valued relation)
        goes through the whole path (gate candidates, entities, mentions, relations, supersession) in a
        transaction that is then rolled back: nothing is stored, and the plans stay in the server's query cache.
        On a server that has seen the statements it is one quick transaction. Returns what the rolled-back write
        did."""
        now = utc_now()
        memory = Memory(id="warm-up", user_id="warm-up", content="Warm-up lives in Warm-up town.", category="fact",
                        scope=Scope.GLOBAL, hash=content_hash("warm-up"), created_at=now, updated_at=now)
        links = MemoryLinks(memory.id, [EntityRef("Warm-up person", "person"), EntityRef("Warm-up town", "place")],
                            [RelationRef("Warm-up person", "lives_in", "Warm-up town", memory.content)])
        done: list[GraphReport] = []

        async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]) -> None:
            done.append(await write_memories(tx, [memory_row(memory)], graph, now, self._names, vectors))
            raise _RolledBack

        with contextlib.suppress(_RolledBack):
            await self._link_write(lambda: link_rows([memory], [links], self._names), body)
        return done[-1]

    async def _write(self, fn: Any, *, slow: bool = False, tx_timeout: float | None = None, **params: Any) -> Any:
        """`fn(tx, **params)` in a managed write transaction. Neo4j ends the transaction after `tx_timeout`
        (default 6x the timeout, the write deadline), the client gives up a little later (so that Neo4j's verdict
        usually arrives first). `slow`: a transaction that was too slow raises ChunkTooSlow (the caller splits
        its chunk) instead of DependencyUnavailable."""
        async def counted(tx: AsyncManagedTransaction, /, **kw: Any) -> Any:
            try:
                return await fn(tx, **kw)
            except TransientError as exc:  # the driver retries the function; we count why
                self.transient_retries += 1
                if "Deadlock" in (exc.code or ""):
                    self.deadlock_retries += 1
                raise

        server_timeout = tx_timeout if tx_timeout is not None else self._timeout * 6
        try:
            async with asyncio.timeout(server_timeout + max(1.0, self._timeout)):
                async with self._driver.session(database=self._db) as session:
                    return await session.execute_write(unit_of_work(timeout=server_timeout)(counted), **params)
        except TimeoutError as exc:
            if slow:
                raise ChunkTooSlow("client deadline passed", server=False) from exc
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except (ServiceUnavailable, DriverError, OSError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except Neo4jError as exc:
            if slow and _server_slow(exc):
                raise ChunkTooSlow(exc.code or "", server=True) from exc
            if isinstance(exc, TransientError):
                raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc
            raise

    async def _chunked(self, kind: str, items: Sequence[_T], write: Callable[[list[_T]], Awaitable[_R]]) -> list[_R]:
        """A bulk write in chunks sized by measured time (chunks.py); `write` calls `_write(..., slow=True)`."""
        if not items:
            return []
        sizer = self._sizers.get(kind)
        if sizer is None:
            sizer = self._sizers[kind] = ChunkSizer(target=self._timeout * 6 / 10,
                                                    start=FIRST_CHUNK[kind.split(":")[0]])
        return await write_chunked(items, sizer, write, self.chunk_stats, kind, self._alive)

    async def _alive(self) -> bool:
        """Does Neo4j answer a trivial query within the timeout (a slow chunk, not an outage)?"""
        try:
            await self.ping()
        except DependencyUnavailable:
            return False
        return True

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

    # ---- writes ---------------------------------------------------------------------------

    async def _link_write(self, links_of: Any, body: Any, *, slow: bool = False) -> Any:
        """`body(tx, graph, vectors)` in one write transaction, `graph` fresh from `links_of()` each time. The
        entity names are embedded before the transaction; names of candidates the transaction found without a
        vector of this embedder are embedded after it rolled back, and it runs again. `slow`: as `_write`."""
        vectors: dict[str, list[float]] = {}
        for _ in range(MAX_VECTOR_ROUNDS):
            graph = links_of()
            if self._names.resolves:
                wanted = [r["name"] for r in graph["entities"] if self._names.name_key(r["name"]) not in vectors]
                vectors |= await self._names.vectors(wanted) if wanted else {}

            async def run(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]) -> Any:
                return await body(tx, graph, vectors)

            try:
                return await self._write(run, slow=slow, graph=graph, vectors=vectors)
            except MissingNameVectors as exc:
                vectors |= await self._names.vectors(exc.names)
        raise DependencyUnavailable("neo4j write: candidates kept arriving without name vectors")

    async def upsert_memories(self, memories: list[Memory], links: list[MemoryLinks] | None = None
                              ) -> GraphReport:
        """The memories and their links, in chunks of memories sized by measured time (a job's few memories are
        one transaction; a bulk write is several, each well inside the deadline)."""
        now = utc_now()
        by_memory: dict[str, list[MemoryLinks]] = {}
        for link in links or []:
            by_memory.setdefault(link.memory_id, []).append(link)

        async def chunk(part: list[Memory]) -> GraphReport:
            rows = sorted((memory_row(m) for m in part), key=lambda r: str(r["id"]))
            part_links = [link for m in part for link in by_memory.get(m.id, [])]

            async def body(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]
                           ) -> GraphReport:
                return await write_memories(tx, rows, graph, now, self._names, vectors)

            done: GraphReport = await self._link_write(lambda: link_rows(part, part_links, self._names), body,
                                                       slow=True)
            return done

        report = GraphReport()
        for part in await self._chunked("upsert", memories, chunk):
            report.add(part)
        return report

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
            await (await tx.run(cypher_writes.UPSERT_MEMORIES, rows=[memory_row(memory)])).consume()
            await (await tx.run(cypher_writes.DROP_SUPPORT, memory_ids=[memory.id], memory_id=memory.id, keep=keep,
                                now=now)).consume()
            await apply_links(tx, graph, now, self._names, vectors)
            result = await tx.run(cypher_writes.INVALIDATED_BY, memory_ids=[memory.id], memory_id=memory.id, now=now,
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
            await (await tx.run(cypher_writes.MARK_REMOVED, rows=rows, now=now)).consume()
            await (await tx.run(cypher_writes.DROP_REMOVED, memory_ids=chunk, dups=chunk_dups, now=now)).consume()
            if chunk_dups:
                await (await tx.run(cypher_writes.ADOPT_EDGES, dups=chunk_dups)).consume()
            result = await tx.run(cypher_writes.EXPIRED_BY, memory_ids=chunk, now=now)
            expired = [str(r["id"]) for r in await result.data()]
            if erase:
                await (await tx.run(cypher_writes.ERASE_FACTS, memory_ids=chunk)).consume()
                await (await tx.run(cypher_writes.ERASE_REMOVED, memory_ids=chunk)).consume()
            return expired

        async def remove(chunk: list[str]) -> list[str]:
            done: list[str] = await self._write(run, slow=True, chunk=chunk)
            return done

        expired = await self._chunked("remove", ids, remove)
        return sorted({e for part in expired for e in part})

    async def import_graph(self, user_id: str, memories: list[Memory], entities: list[dict[str, Any]],
                           mentions: list[dict[str, str]], facts: list[dict[str, Any]]) -> None:
        check_id(user_id, "user_id")
        memory_rows = [memory_row(m) for m in memories if m.user_id == user_id]
        ent_rows = [{**e, "name_lc": entity_name(str(e["name"])).casefold(),
                     "ft_key": ft_key(user_id, str(e["group_id"])),
                     "keys": sorted({*self._names.keys_of([str(e["name"]), *e["aliases"]]), *e.get("keys", [])}),
                     "identity": e.get("identity", {})} for e in entities]
        fact_rows = [{**f, "ft_key": ft_key(user_id, str(f["group_id"]))} for f in facts]

        async def run(tx: AsyncManagedTransaction, stmt: LiteralString, rows: list[dict[str, Any]]) -> None:
            await (await tx.run(stmt, rows=rows, user_id=user_id)).consume()

        # entities, then memories, then mentions and facts (which need both), each in chunks sized by time
        steps: tuple[tuple[str, LiteralString, list[dict[str, Any]]], ...] = (
            ("import:entities", cypher_portability.IMPORT_ENTITIES, ent_rows),
            ("import:memories", cypher_portability.IMPORT_MEMORIES, memory_rows),
            ("import:mentions", cypher_writes.UPSERT_MENTIONS, [dict(m) for m in mentions]),
            ("import:facts", cypher_portability.IMPORT_FACTS, fact_rows),
        )
        for kind, stmt, rows in steps:
            async def write(part: list[dict[str, Any]], stmt: LiteralString = stmt) -> None:
                await self._write(run, slow=True, stmt=stmt, rows=part)

            await self._chunked(kind, rows, write)

    async def ping(self) -> None:
        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run("RETURN 1")).consume()

        await self._read(run)

    async def close(self) -> None:
        await self._driver.close()
