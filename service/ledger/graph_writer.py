"""One graph writer per user: the graph writes of concurrent jobs, coalesced and serialised.

Concurrent jobs of one user MERGE the same (:Entity) nodes (the user, the people and tools they talk
about). Run as concurrent transactions they take the nodes' locks in different orders and Neo4j
answers `DeadlockDetected`. Here every graph write of a user goes through one queue in this process:
the upserts waiting in it are written together in one transaction (rows sorted by id, so writers in
other processes lock in the same order), and an update or a delete runs alone, in arrival order.
Different users never share an entity, so their writers run side by side.
Only `service/ledger/ledger.py` holds one. Why coalescing and not retries: docs/decisions.md ("Graph writes under
contention").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from service.core.domain import Memory
from service.core.errors import DependencyUnavailable
from service.stores.graph import MemoryGraphWrites, MemoryLinks
from service.stores.reports import GraphReport

log = structlog.get_logger(__name__)

MAX_BATCH_MEMORIES = 256  # memories per coalesced upsert (the store cuts it into chunks sized by time)


@dataclass
class _Op:
    future: asyncio.Future[Any]
    memories: list[Memory] = field(default_factory=list)  # an upsert
    links: list[MemoryLinks] = field(default_factory=list)
    run: Callable[[], Awaitable[Any]] | None = None  # anything else: runs alone


class GraphWriter:
    def __init__(self, graph: MemoryGraphWrites, max_batch: int = MAX_BATCH_MEMORIES) -> None:
        self._graph = graph
        self._max_batch = max_batch
        self._queues: dict[str, list[_Op]] = {}
        self._flushers: dict[str, asyncio.Task[None]] = {}
        self.batches = 0  # transactions written (coalesced upserts count once)
        self.coalesced = 0  # upserts that shared a transaction with another

    async def upsert(self, user_id: str, memories: list[Memory], links: list[MemoryLinks]) -> GraphReport:
        """What the graph did with these memories' links (a coalesced write's report, cut to them)."""
        report: GraphReport = await self._submit(user_id, _Op(self._future(), memories=memories, links=links))
        return report

    async def replace(self, user_id: str, memory: Memory, links: MemoryLinks, now: str) -> list[str]:
        result: list[str] = await self._submit(
            user_id, _Op(self._future(), run=lambda: self._graph.replace_memory(memory, links, now)))
        return result

    async def remove(
        self, user_id: str, memory_ids: list[str], now: str, duplicate_of: dict[str, str] | None = None
    ) -> list[str]:
        result: list[str] = await self._submit(user_id, _Op(
            self._future(),
            run=lambda: self._graph.remove_memories(memory_ids, now, duplicate_of, user_id=user_id, erase=True)))
        return result

    @staticmethod
    def _future() -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    async def _submit(self, user_id: str, op: _Op) -> Any:
        self._queues.setdefault(user_id, []).append(op)
        flusher = self._flushers.get(user_id)
        if flusher is None or flusher.done():
            self._flushers[user_id] = asyncio.create_task(self._flush(user_id), name=f"graph-writer-{user_id}")
        return await asyncio.shield(op.future)

    async def _flush(self, user_id: str) -> None:
        queue = self._queues[user_id]
        try:
            for _ in range(1_000_000):  # bounded; ends when the queue is empty
                if not queue:
                    break
                if queue[0].run is not None:
                    op = queue.pop(0)
                    await _settle(op, op.run)  # type: ignore[arg-type]
                    self.batches += 1
                    continue
                batch: list[_Op] = []
                size = 0
                while queue and queue[0].run is None and (
                        not batch or size + len(queue[0].memories) <= self._max_batch):
                    op = queue.pop(0)
                    batch.append(op)
                    size += len(op.memories)
                await self._write_batch(batch)
        finally:
            if not queue:
                self._queues.pop(user_id, None)
                self._flushers.pop(user_id, None)

    async def _write_batch(self, batch: list[_Op]) -> None:
        self.batches += 1
        if len(batch) == 1:
            op = batch[0]
            await _settle(op, lambda: self._graph.upsert_memories(op.memories, op.links))
            return
        memories = [m for op in batch for m in op.memories]
        links = [link for op in batch for link in op.links]
        try:
            report = await self._graph.upsert_memories(memories, links)
        except DependencyUnavailable as exc:  # an outage fails them all alike: no point in trying each
            for op in batch:
                if not op.future.done():
                    op.future.set_exception(exc)
            return
        except Exception as exc:
            # One bad write must not fail its neighbours: write each alone, each gets its own answer.
            log.warning("graph_batch_split", jobs=len(batch), error=f"{type(exc).__name__}: {exc}"[:300])
            for op in batch:
                await _settle(op, lambda op=op: self._graph.upsert_memories(op.memories, op.links))  # type: ignore[misc]
            return
        self.coalesced += len(batch)
        for op in batch:
            if not op.future.done():
                op.future.set_result(report.of([m.id for m in op.memories]))


async def _settle(op: _Op, call: Callable[[], Awaitable[Any]]) -> None:
    try:
        result = await call()
    except Exception as exc:  # handed to the waiting job, which decides (retry, pending, failed)
        if not op.future.done():
            op.future.set_exception(exc)
        return
    if not op.future.done():
        op.future.set_result(result)
