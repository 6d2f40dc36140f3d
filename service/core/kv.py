"""Redis helpers shared by every part of the service that keeps something in Redis.

- `redis_guard`: the one guard around a Redis call (a timeout, and any Redis failure as DependencyUnavailable);
  `redis_settle` the same, tried in place a few times, for a job's idempotent bookkeeping after its writes.
- `RedisKV`: small values under the deployment's namespace (`<ARQ_QUEUE_NAME>:<name>`): JSON values (fold
  pointers, re-embed positions, idempotency keys), blobs (uploads a job reads later), a job's step caches (what a
  replay reuses) and the write-path counters /health shows.

Task records, the pending set and leases are the task queue's (service/tasks/queue.py).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from arq.connections import ArqRedis
from redis.exceptions import RedisError

from service.core.errors import DependencyUnavailable
from service.core.keys import Keys
from service.core.loop import lag_allowance
from service.core.settings import RedisQueueSettings

_T = TypeVar("_T")

STEPS = ("extraction", "targets")  # the intermediate results a job keeps for its replays (save_step)


async def aw(value: Awaitable[_T] | _T) -> _T:
    """redis-py types some async methods as `Awaitable[T] | T`; here they are always awaitable."""
    return await value if inspect.isawaitable(value) else value  # type: ignore[return-value]


async def redis_guard(settings: RedisQueueSettings, what: str, coro: Awaitable[_T], *, scale: float = 1.0) -> _T:
    """The one Redis guard: run a Redis call within REDIS_TIMEOUT_SECONDS (x `scale` for multi-call
    steps); any Redis failure is DependencyUnavailable (the API answers 503, the worker retries the job)."""
    try:
        async with asyncio.timeout(settings.timeout_seconds * scale + lag_allowance()):  # the loop's lateness too
            return await coro
    except (RedisError, OSError, TimeoutError) as exc:
        raise DependencyUnavailable(f"redis unavailable ({what}) at {settings.safe_url}: {exc}",
                                    public=redis_cause(exc)) from exc


def redis_cause(exc: BaseException) -> str:
    """A Redis failure as a user reads it: the cause and when writes resume, with no URL, script or server text."""
    text = str(exc)
    if text.startswith("MISCONF") or "No space left on device" in text:
        return ("the queue's disk is full (Redis cannot save its data); writes resume when space is freed on the "
                "Redis host")
    if text.startswith("OOM"):
        return "the queue is out of memory (Redis maxmemory); writes resume when memory is freed"
    if text.startswith(("READONLY", "NOREPLICAS")) or "replica" in text.casefold():
        return "the queue (Redis) is changing primaries; writes resume in a few seconds"
    if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
        return "the queue (Redis) did not answer in time; try again shortly"
    return "the queue (Redis) is unreachable; writes resume when it is back"


SETTLE_S = 30.0  # how long a job's bookkeeping after its writes is tried in place


async def redis_settle(settings: RedisQueueSettings, what: str, call: Callable[[], Awaitable[_T]]) -> _T:
    """`redis_guard` for an idempotent step a job takes after its writes landed (clearing its outbox entry, its
    final record), tried in place for up to SETTLE_S, 0.5 s doubling to 4 s apart. A slow moment of Redis then
    costs seconds, not a trip through the job's retries, which would run the writes again."""
    deadline = time.monotonic() + SETTLE_S
    for attempt in range(1000):  # bounded in count and in time
        try:
            return await redis_guard(settings, what, call())
        except DependencyUnavailable:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(min(4.0, 0.5 * 2**attempt))
    return await redis_guard(settings, what, call())


class RedisKV:
    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._settings = settings
        self._keys = Keys(settings.queue_name)

    def key(self, name: str) -> str:
        """A Redis key in this deployment's namespace (`<queue>:<name>`)."""
        return self._keys.of(name)

    async def _guard(self, what: str, coro: Awaitable[_T]) -> _T:
        return await redis_guard(self._settings, what, coro)

    # ---- JSON values ----------------------------------------------------------------------------

    async def get_json(self, name: str, *, what: str = "get") -> Any:
        """A small JSON value under `<queue>:<name>` (None when missing); `what` names it in an error."""
        raw = await self._guard(what, self._redis.get(self.key(name)))
        return json.loads(raw) if raw else None

    async def set_json(self, name: str, value: Any, ttl_s: int | None = None, *, only_new: bool = False,
                       what: str = "set") -> bool:
        """Store `value` for `ttl_s` (default TASK_TTL_SECONDS); `only_new`: only if nothing is there yet.
        Returns whether it was stored."""
        ttl = ttl_s or self._settings.task_ttl_seconds
        stored = await self._guard(what, self._redis.set(self.key(name), json.dumps(value), ex=ttl, nx=only_new))
        return bool(stored)

    # ---- blobs ----------------------------------------------------------------------------------

    async def store_blob(self, name: str, body: bytes) -> str:
        """An upload a job reads later (an import file), kept for TASK_TTL_SECONDS; returns its key."""
        key = self._keys.blob(name)
        await self._guard("upload", self._redis.set(key, body, ex=self._settings.task_ttl_seconds))
        return key

    async def load_blob(self, key: str) -> bytes | None:
        raw: bytes | None = await self._guard("upload", self._redis.get(key))
        return raw

    async def drop_blob(self, key: str) -> None:
        await self._guard("upload", self._redis.delete(key))

    # ---- a job's step caches --------------------------------------------------------------------

    async def save_step(self, task_id: str, step: str, value: str) -> None:
        """Keep an intermediate result of a job so that a replay reuses it (LLM output, resolved ids)."""
        assert step in STEPS, step  # the task queue drops exactly these when the task ends
        key = self._keys.task_step(task_id, step)
        await self._guard("save step", self._redis.set(key, value, ex=self._settings.task_ttl_seconds))

    async def load_step(self, task_id: str, step: str) -> str | None:
        raw = await self._guard("load step", self._redis.get(self._keys.task_step(task_id, step)))
        return raw.decode() if raw is not None else None

    # ---- write-path counters --------------------------------------------------------------------

    async def add_stats(self, **deltas: int) -> None:
        """Cluster-wide write-path counters (`<queue>:stats`), shown by /health."""
        async def run() -> None:
            pipe = self._redis.pipeline(transaction=False)
            for name, delta in deltas.items():
                if delta:
                    pipe.hincrby(self._keys.stats, name, delta)
            await pipe.execute()

        if any(deltas.values()):
            await self._guard("stats", run())

    async def stats(self) -> dict[str, int]:
        raw = await self._guard("stats", aw(self._redis.hgetall(self._keys.stats)))
        return {k.decode(): int(v) for k, v in raw.items()}

    # ---- event loops (service/core/loop.py) -----------------------------------------------------

    async def note_loop(self, snapshot: dict[str, Any]) -> None:
        """A process's event-loop figures, for /health (`<queue>:loops`, one field per process)."""
        field = f"{snapshot.get('role')}:{snapshot.get('pid')}"
        await self._guard("loop lag", aw(self._redis.hset(self._keys.loops, field,
                                                         json.dumps({**snapshot, "at": time.time()}))))

    async def loops(self, max_age_s: float) -> list[dict[str, Any]]:
        """The figures of every process that wrote them in the last `max_age_s` (older ones are dropped)."""
        raw = await self._guard("loop lag", aw(self._redis.hgetall(self._keys.loops)))
        fresh: list[tuple[bytes, dict[str, Any]]] = []
        stale: list[tuple[bytes, dict[str, Any]]] = []
        for field, value in raw.items():
            rec = json.loads(value)
            (fresh if time.time() - float(rec.get("at", 0)) <= max_age_s else stale).append((field, rec))
        if stale:
            await self._guard("loop lag", aw(self._redis.hdel(self._keys.loops, *(f.decode() for f, _ in stale))))
        return [rec for _, rec in sorted(fresh, key=lambda item: item[0])]
