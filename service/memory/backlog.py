"""The write path's backlog: the queue, task and outbox gauges of /metrics and the figures of /health."""

from __future__ import annotations

from typing import Protocol

from service.core.metrics import OUTBOX_DEPTH, QUEUE_DEPTH, QUEUE_OLDEST
from service.schemas.memories import WritePathHealth


class QueueBacklog(Protocol):
    async def pending_count(self) -> int: ...

    async def queued_jobs(self) -> int: ...

    async def oldest_pending_age_s(self) -> float: ...


class OutboxStats(Protocol):
    async def stats(self) -> tuple[int, float | None]:
        """(intents held, age in seconds of the oldest)."""


class WriteCounters(Protocol):
    async def stats(self) -> dict[str, int]:
        """The write path's counters (retries of graph transactions)."""


class Backlog:
    def __init__(self, tasks: QueueBacklog, outbox: OutboxStats, counters: WriteCounters) -> None:
        self.tasks = tasks
        self.outbox = outbox
        self.counters = counters

    async def refresh_gauges(self) -> None:
        """Queue, task and outbox gauges, read from Redis when /metrics is scraped."""
        depth, _ = await self.outbox.stats()
        OUTBOX_DEPTH.set(depth)
        QUEUE_DEPTH.set(await self.tasks.queued_jobs())
        QUEUE_OLDEST.set(await self.tasks.oldest_pending_age_s())

    async def write_path_stats(self) -> WritePathHealth:
        """The write path's backlog for /health (Redis must be up)."""
        depth, oldest = await self.outbox.stats()
        stats = await self.counters.stats()
        return WritePathHealth(
            outbox_depth=depth, outbox_oldest_age_s=oldest, pending_tasks=await self.tasks.pending_count(),
            graph_transient_retries=stats.get("graph_transient_retries", 0),
            deadlock_retries=stats.get("deadlock_retries", 0),
        )
