"""What every part of the task queue shares: its Redis, its settings, its key names, and the guard that bounds each
Redis call (service/core/kv.py `redis_guard`). The parts: accepting (queue.py), task records (records.py), leases and
the reaper (leases.py), erasure (erasure.py) and Idempotency-Key records (idempotency.py)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from arq.connections import ArqRedis

from service.core.domain import TaskStatus
from service.core.keys import Keys
from service.core.kv import redis_guard
from service.core.settings import RedisQueueSettings

_T = TypeVar("_T")
ENDED = (TaskStatus.COMPLETED.value, TaskStatus.FAILED.value)  # a task's record in one of these has ended


class RedisPart:
    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._settings = settings
        self.keys = Keys(settings.queue_name)

    @property
    def redis(self) -> ArqRedis:
        return self._redis

    def key(self, name: str) -> str:
        """A Redis key in this deployment's namespace (`<queue>:<name>`)."""
        return self.keys.of(name)

    async def _guard(self, what: str, coro: Awaitable[_T], scale: float = 1.0) -> _T:
        return await redis_guard(self._settings, what, coro, scale=scale)

    @property
    def _wait_replicas(self) -> int:
        """REDIS_WAIT_REPLICAS, which applies with Sentinel only (a lone Redis has no replicas to wait for)."""
        return self._settings.wait_replicas if self._settings.sentinels else 0

    @property
    def _wait_ms(self) -> int:
        return max(1, int(self._settings.timeout_seconds * 500))
