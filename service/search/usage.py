"""How often each memory was retrieved: a Redis hash per user (`<queue>:retrieved:<user_id>`, memory id ->
count), raised by every search for the results it returned (not those folded into them), read by the context to
put often-retrieved memories first. Counting never slows or fails a search: it runs in the background and a
Redis failure is logged. Ids only, no content. A delete forgets the deleted memories' counts (`forget`), and a
delete of everything the user's hash, so the hashes hold only what is stored (a count raised by a search that
returned a memory just before its delete may land after it: one field, ignored, since nothing lists it)."""

from __future__ import annotations

import asyncio

import structlog
from arq.connections import ArqRedis

from service.core.keys import Keys
from service.core.kv import aw, redis_guard
from service.core.settings import RedisQueueSettings

log = structlog.get_logger(__name__)

MAX_PENDING = 64  # counting writes in flight; past it a search is not counted (never queued behind Redis)


class RetrievalCounts:
    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._settings = settings
        self._keys = Keys(settings.queue_name)
        self._pending: set[asyncio.Task[None]] = set()

    def count(self, user_id: str, memory_ids: list[str]) -> None:
        """Add one to each memory's count, in the background."""
        if not memory_ids or len(self._pending) >= MAX_PENDING:
            return
        task = asyncio.create_task(self._add(user_id, memory_ids))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _add(self, user_id: str, memory_ids: list[str]) -> None:
        key = self._keys.retrieved(user_id)
        pipe = self._redis.pipeline(transaction=False)
        for mid in dict.fromkeys(memory_ids):
            pipe.hincrby(key, mid, 1)
        try:
            await redis_guard(self._settings, "count retrievals", pipe.execute())
        except Exception as exc:  # a lost count must not fail anything; it is logged
            log.warning("retrieval_count_failed", error=f"{type(exc).__name__}: {exc}"[:300])

    async def counts(self, user_id: str) -> dict[str, int]:
        """Memory id -> times retrieved, for the user; {} when Redis does not answer in time (the context is
        then ordered without it)."""
        try:
            raw = await redis_guard(self._settings, "read retrieval counts",
                                    aw(self._redis.hgetall(self._keys.retrieved(user_id))))
        except Exception as exc:
            log.warning("retrieval_counts_unread", error=f"{type(exc).__name__}: {exc}"[:300])
            return {}
        return {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in raw.items()}

    async def forget(self, user_id: str, memory_ids: list[str], everything: bool = False) -> None:
        """Drop the counts of deleted memories (all of the user's with `everything`). Part of the delete: a Redis
        failure raises (the delete job is retried), so no count outlives its memory for good."""
        key = self._keys.retrieved(user_id)
        if everything:
            await redis_guard(self._settings, "forget retrieval counts", aw(self._redis.delete(key)))
            return
        for start in range(0, len(memory_ids), 500):
            await redis_guard(self._settings, "forget retrieval counts",
                              aw(self._redis.hdel(key, *memory_ids[start:start + 500])))

    async def drain(self) -> None:
        """Wait for the counts in flight (tests, shutdown)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
