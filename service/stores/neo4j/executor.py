"""The one query executor every part of the Neo4j backend shares: the driver, its sessions, managed read and write
transactions, their retries and deadlines, auto-commit reads, bulk writes in chunks sized by measured time, and the
counters of transactions the driver re-ran. The parts (memories.py, reads.py, facts.py, curation.py, ...) hold the
statements and take this executor in their constructor; none opens a session of its own, except the schema's
start-up migration, which commits in batches itself (`session`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, LiteralString, TypeVar

from neo4j import (
    READ_ACCESS,
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    AsyncSession,
    NotificationDisabledClassification,
    unit_of_work,
)
from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, TransientError

from service.core.errors import DependencyUnavailable
from service.stores.graph import EntityNameRules
from service.stores.neo4j.chunks import ChunkSizer, ChunkStats, ChunkTooSlow, write_chunked

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


class MissingNameVectors(Exception):
    """Raised inside the transaction (rolling it back): these names need embedding first."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"{len(names)} entity names need embeddings")
        self.names = names


class Neo4jExecutor:
    """Sessions, transactions, retries and deadlines for one Neo4j database. `timeout` bounds a read and a
    connection; a write transaction's deadline is 6x it (Neo4j ends it, the client gives up a little later)."""

    def __init__(self, uri: str, user: str, password: str | None, database: str, timeout: float) -> None:
        auth = (user, password) if password else None
        self.driver: AsyncDriver = AsyncGraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=timeout,
            connection_acquisition_timeout=timeout,
            max_transaction_retry_time=timeout,
            # "property key does not exist" on a fresh graph (merged_into before any merge) is not news
            notifications_disabled_classifications=["UNRECOGNIZED"],
        )
        self.database = database
        self.timeout = timeout
        self.transient_retries = 0  # transaction functions the driver re-ran on a transient error
        self.deadlock_retries = 0  # ... of which on DeadlockDetected
        self._sizers: dict[str, ChunkSizer] = {}  # bulk write chunk sizes, by kind (chunks.py)
        self.chunk_stats = ChunkStats()

    def session(self) -> AsyncSession:
        """A plain session of the database: for a statement that commits in batches itself (CALL ... IN
        TRANSACTIONS); the caller bounds it and maps its errors."""
        return self.driver.session(database=self.database)

    async def write(self, fn: Any, *, slow: bool = False, tx_timeout: float | None = None, **params: Any) -> Any:
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

        server_timeout = tx_timeout if tx_timeout is not None else self.timeout * 6
        try:
            async with asyncio.timeout(server_timeout + max(1.0, self.timeout)):
                async with self.driver.session(database=self.database) as session:
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

    async def chunked(self, kind: str, items: Sequence[_T], write: Callable[[list[_T]], Awaitable[_R]]) -> list[_R]:
        """A bulk write in chunks sized by measured time (chunks.py); `write` calls `write(..., slow=True)`."""
        if not items:
            return []
        sizer = self._sizers.get(kind)
        if sizer is None:
            sizer = self._sizers[kind] = ChunkSizer(target=self.timeout * 6 / 10,
                                                    start=FIRST_CHUNK[kind.split(":")[0]])
        return await write_chunked(items, sizer, write, self.chunk_stats, kind, self.alive)

    async def alive(self) -> bool:
        """Does Neo4j answer a trivial query within the timeout (a slow chunk, not an outage)?"""
        try:
            await self.ping()
        except DependencyUnavailable:
            return False
        return True

    async def read(self, fn: Any, **params: Any) -> Any:
        """`fn(tx, **params)` in a managed read transaction, within the timeout."""
        try:
            async with asyncio.timeout(self.timeout):
                # No "unrecognized" notifications (a property no node has yet, like deleted_at before the first
                # delete): the service would log each one, with the statement, on every search.
                async with self.driver.session(database=self.database,
                                               notifications_disabled_classifications=_QUIET_READS) as session:
                    return await session.execute_read(fn, **params)
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            raise DependencyUnavailable(f"neo4j transient error after the driver's retries: {exc.code}") from exc

    async def read_one(self, stmt: LiteralString, **params: Any) -> list[tuple[Any, ...]]:
        """One read statement in an auto-commit transaction: one round trip (RUN and PULL pipelined), where a
        managed transaction adds BEGIN and COMMIT (2-3 ms at p50 here). No retry on a transient error: for the
        search's graph retriever that is a degraded answer, not a longer wait. Same errors as `read`."""
        try:
            async with asyncio.timeout(self.timeout):
                async with self.driver.session(database=self.database, default_access_mode=READ_ACCESS,
                                               notifications_disabled_classifications=_QUIET_READS) as session:
                    result = await session.run(stmt, **params)
                    return [tuple(record.values()) async for record in result]
        except (ServiceUnavailable, DriverError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"neo4j unavailable: {exc}") from exc
        except TransientError as exc:
            raise DependencyUnavailable(f"neo4j transient error: {exc.code}") from exc

    async def link_write(self, names: EntityNameRules, links_of: Any, body: Any, *, slow: bool = False) -> Any:
        """`body(tx, graph, vectors)` in one write transaction, `graph` fresh from `links_of()` each time. The
        entity names are embedded (by `names`) before the transaction; names of candidates the transaction found
        without a vector of this embedder are embedded after it rolled back, and it runs again. `slow`: as
        `write`."""
        vectors: dict[str, list[float]] = {}
        for _ in range(MAX_VECTOR_ROUNDS):
            graph = links_of()
            if names.resolves:
                wanted = [r["name"] for r in graph["entities"] if names.name_key(r["name"]) not in vectors]
                vectors |= await names.vectors(wanted) if wanted else {}

            async def run(tx: AsyncManagedTransaction, graph: dict[str, Any], vectors: dict[str, list[float]]) -> Any:
                return await body(tx, graph, vectors)

            try:
                return await self.write(run, slow=slow, graph=graph, vectors=vectors)
            except MissingNameVectors as exc:
                vectors |= await names.vectors(exc.names)
        raise DependencyUnavailable("neo4j write: candidates kept arriving without name vectors")

    async def ping(self) -> None:
        """Raise DependencyUnavailable if the graph cannot serve requests."""
        async def run(tx: AsyncManagedTransaction) -> None:
            await (await tx.run("RETURN 1")).consume()

        await self.read(run)

    async def close(self) -> None:
        await self.driver.close()
