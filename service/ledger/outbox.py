"""The write outbox and the per-memory locks, both in Redis.

Outbox: before a job touches a store it records what both stores must end up holding (an *intent*):
the memories and graph links of a write, the new content of an update, the ids of a delete. The job
clears the intent once both stores hold it. An intent left behind (the graph was down, the worker
died) is finished by the reconciler (service/maintenance/reconcile.py). Keys, under `<queue>:`:

- `outbox`     hash   entry id (the task id) -> JSON intent
- `outbox:at`  zset   entry id -> time the intent was recorded (ms): age and drain order
- `tombstones` zset   "<user id>/<memory id>" -> time its delete was recorded (ms), kept TASK_TTL_SECONDS:
  a retried delete of a half-deleted memory is accepted by it, and the full reconcile tells a deleted
  memory (finish the delete) from a lost vector (re-embed) by it. Ids only, never content.

Memory locks: `<queue>:mlock:<memory id>`, SET NX with a short TTL, so an update, a delete and a dedup
removal of the same memory never interleave (a lost update, or a resurrected memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from arq.connections import ArqRedis
from pydantic import BaseModel, Field

from service.core.domain import Memory
from service.core.errors import ServiceError
from service.core.keys import Keys
from service.core.kv import aw, redis_guard, redis_settle
from service.core.settings import RedisQueueSettings
from service.stores.graph import EntityRef, MemoryLinks, RelationRef

LOCK_TTL_MS = 30_000
LOCK_WAIT_S = 10.0  # how long a job waits for another job's lock on the same memory
LOCK_POLL_S = 0.05
LOCK_CHUNK = 500

_RELEASE_LOCKS = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then n = n + redis.call('DEL', key) end
end
return n
"""


class MemoryBusy(ServiceError):
    """Another job holds the lock of one of these memories: the job is retried shortly (not an error)."""

    status_code = 409


class Intent(BaseModel):
    """What one job must leave in both stores."""

    op: Literal["upsert", "replace", "remove"]
    task_id: str
    user_id: str
    memories: list[Memory] = Field(default_factory=list)  # upsert, replace (one memory)
    links: list[dict[str, Any]] = Field(default_factory=list)  # MemoryLinks as dicts, per memory
    memory_ids: list[str] = Field(default_factory=list)  # remove
    now: str | None = None  # replace / remove: the time the graph records
    attempts: int = 0  # reconciler attempts so far

    @classmethod
    def of_links(cls, links: Sequence[MemoryLinks]) -> list[dict[str, Any]]:
        return [dataclasses.asdict(link) for link in links]

    def graph_links(self) -> list[MemoryLinks]:
        return [
            MemoryLinks(
                memory_id=raw["memory_id"],
                entities=[EntityRef(**e) for e in raw.get("entities", [])],
                relations=[RelationRef(**r) for r in raw.get("relations", [])],
            )
            for raw in self.links
        ]

    def ids(self) -> list[str]:
        return self.memory_ids if self.op == "remove" else [m.id for m in self.memories]


class Outbox:
    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._settings = settings
        keys = Keys(settings.queue_name)
        self._hash, self._at, self._tombstones = keys.outbox, keys.outbox_at, keys.tombstones

    async def put(self, intent: Intent) -> None:
        async def run() -> None:
            now_ms = time.time() * 1000
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(self._hash, intent.task_id, intent.model_dump_json())
            pipe.zadd(self._at, {intent.task_id: now_ms}, nx=True)
            if intent.op == "remove":
                pipe.zadd(self._tombstones, {f"{intent.user_id}/{i}": now_ms for i in intent.memory_ids})
                pipe.zremrangebyscore(self._tombstones, 0, now_ms - self._settings.task_ttl_seconds * 1000)
            await pipe.execute()

        await redis_guard(self._settings, "outbox put", run())

    async def tombstoned(self, user_id: str, memory_ids: Sequence[str]) -> set[str]:
        """The ids among these whose delete by this user was recorded (within TASK_TTL_SECONDS)."""
        ids = list(memory_ids)
        if not ids:
            return set()
        members = [f"{user_id}/{i}" for i in ids]
        scores = await redis_guard(self._settings, "tombstones", aw(self._redis.zmscore(self._tombstones, members)))
        return {i for i, score in zip(ids, scores, strict=True) if score is not None}

    async def save(self, intent: Intent) -> None:
        """Rewrite an entry in place (the reconciler's attempt count), keeping its age."""
        await redis_guard(self._settings, "outbox save",
                          aw(self._redis.hset(self._hash, intent.task_id, intent.model_dump_json())))

    async def clear(self, entry_id: str) -> None:
        async def run() -> None:
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(self._hash, entry_id)
            pipe.zrem(self._at, entry_id)
            await pipe.execute()

        await redis_settle(self._settings, "outbox clear", run)

    async def due(self, older_than_s: float, limit: int, offset: int = 0) -> list[Intent]:
        """The oldest entries recorded at least `older_than_s` ago (after the first `offset` of them)."""
        cutoff = (time.time() - older_than_s) * 1000

        async def run() -> list[Intent]:
            ids = await self._redis.zrangebyscore(self._at, 0, cutoff, start=offset, num=limit)
            if not ids:
                return []
            raws = await aw(self._redis.hmget(self._hash, [i.decode() for i in ids]))
            gone = [i for i, raw in zip(ids, raws, strict=True) if raw is None]
            if gone:
                await self._redis.zrem(self._at, *gone)
            return [Intent.model_validate_json(raw) for raw in raws if raw is not None]

        return await redis_guard(self._settings, "outbox read", run())

    async def all_ids(self, limit: int = 100_000) -> set[str]:
        """Every memory id an entry names (the full reconcile leaves them to the drain)."""
        async def run() -> set[str]:
            out: set[str] = set()
            cursor = 0
            for _ in range(limit // 100 + 1):
                cursor, chunk = await aw(self._redis.hscan(self._hash, cursor=cursor, count=100))
                for raw in chunk.values():
                    out.update(Intent.model_validate_json(raw).ids())
                if cursor == 0:
                    break
            return out

        return await redis_guard(self._settings, "outbox scan", run())

    async def stats(self) -> tuple[int, float | None]:
        """(depth, age of the oldest entry in seconds or None when empty)."""
        async def run() -> tuple[int, float | None]:
            depth = int(await self._redis.zcard(self._at))
            oldest: list[Any] = await self._redis.zrange(self._at, 0, 0, withscores=True)  # type: ignore[misc]
            age = round(time.time() - oldest[0][1] / 1000, 3) if oldest else None
            return depth, age

        return await redis_guard(self._settings, "outbox stats", run())


class MemoryLocks:
    """Short per-memory locks (Redis SET NX PX), taken in id order, released by their token only."""

    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._settings = settings
        self._keys = Keys(settings.queue_name)
        self._release = redis.register_script(_RELEASE_LOCKS)

    async def try_acquire(self, ids: Sequence[str], token: str) -> set[str]:
        """Lock as many of `ids` as are free; returns those locked."""
        ordered = sorted(set(ids))

        async def run() -> set[str]:
            got: set[str] = set()
            for start in range(0, len(ordered), LOCK_CHUNK):
                chunk = ordered[start : start + LOCK_CHUNK]
                pipe = self._redis.pipeline(transaction=False)
                for i in chunk:
                    pipe.set(self._keys.memory_lock(i), token, nx=True, px=LOCK_TTL_MS)
                got.update(i for i, ok in zip(chunk, await pipe.execute(), strict=True) if ok)
            return got

        return await redis_guard(self._settings, "memory lock", run())

    async def release(self, ids: Sequence[str], token: str) -> None:
        ordered = sorted(set(ids))
        for start in range(0, len(ordered), LOCK_CHUNK):
            keys = [self._keys.memory_lock(i) for i in ordered[start : start + LOCK_CHUNK]]
            await redis_guard(self._settings, "memory unlock", self._release(keys=keys, args=[token]))

    @contextlib.asynccontextmanager
    async def hold(self, ids: Sequence[str], wait_s: float = LOCK_WAIT_S) -> AsyncIterator[None]:
        """All of `ids` or none: waits up to `wait_s` for locks other jobs hold, then raises MemoryBusy."""
        token = uuid.uuid4().hex
        wanted = set(ids)
        got: set[str] = set()
        try:
            deadline = time.monotonic() + wait_s
            for _ in range(int(wait_s / LOCK_POLL_S) + 2):
                got |= await self.try_acquire(sorted(wanted - got), token)
                if got >= wanted or time.monotonic() >= deadline:
                    break
                await asyncio.sleep(LOCK_POLL_S)
            if got < wanted:
                busy = sorted(wanted - got)
                raise MemoryBusy(f"memory {busy[0]} is being changed by another job")
            yield
        finally:
            if got:
                await self.release(sorted(got), token)
