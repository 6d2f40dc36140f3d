"""Enqueue memory writes in ARQ and keep their status records in Redis.

Keys (prefixed with ARQ_QUEUE_NAME, so deployments sharing one Redis stay apart):
- `<queue>:task:<task_id>`   JSON status record, lives TASK_TTL_SECONDS.
- `<queue>:idem:<req_hash>`  the task id that answers identical requests; lives while the task is
  pending, then IDEMPOTENCY_WINDOW_SECONDS after it finished (so retries share a task, history
  does not). Its lifetime is independent of both the status record and ARQ's job/result keys.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import msgpack
import structlog
from arq.connections import ArqRedis, RedisSettings, create_pool
from redis.exceptions import RedisError

from service.domain import ID_NAMESPACE, TaskResponse, TaskStatus
from service.errors import DependencyUnavailable, NotFound
from service.settings import Settings

log = structlog.get_logger(__name__)

JOB_FUNCTION = "process_memory_write"

# Shrink the idempotency pointer's TTL only if it still names this task.
_RELEASE_IDEM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if tonumber(ARGV[2]) > 0 then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def job_serializer(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def job_deserializer(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


def redis_settings(settings: Settings) -> RedisSettings:
    rs = RedisSettings.from_dsn(settings.redis_url)
    rs.conn_timeout = max(1, int(settings.redis_timeout_seconds))
    rs.conn_retries = 2
    return rs


async def connect_redis(settings: Settings) -> ArqRedis:
    try:
        return await create_pool(
            redis_settings(settings),
            job_serializer=job_serializer,
            job_deserializer=job_deserializer,
            default_queue_name=settings.arq_queue_name,
        )
    except (RedisError, OSError) as exc:
        raise DependencyUnavailable(f"redis unreachable at {settings.redis_url}: {exc}") from exc


def request_hash(kind: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps({"kind": kind, **fields}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


class TaskQueue:
    """The API side of writes (enqueue, poll) and the worker side of status updates."""

    def __init__(self, redis: ArqRedis, settings: Settings) -> None:
        self._redis = redis
        self._settings = settings
        self._release = redis.register_script(_RELEASE_IDEM)
        self._task_prefix = f"{settings.arq_queue_name}:task:"
        self._idem_prefix = f"{settings.arq_queue_name}:idem:"

    async def _guard(self, what: str, coro: Any) -> Any:
        try:
            async with asyncio.timeout(self._settings.redis_timeout_seconds):
                return await coro
        except (RedisError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"queue unavailable ({what}): redis at {self._settings.redis_url}") from exc

    async def enqueue(
        self, kind: str, identity: dict[str, Any], payload: dict[str, Any], *, user_id: str | None = None
    ) -> str:
        """Accept a write: returns the task id (an existing one for a retried identical request)."""
        return str(await self._guard("enqueue", self._enqueue(kind, identity, payload, user_id)))

    async def _enqueue(self, kind: str, identity: dict[str, Any], payload: dict[str, Any], user_id: str | None) -> str:
        req = request_hash(kind, identity)
        idem_key = self._idem_prefix + req
        accepted_at = now_iso()
        task_id = uuid.uuid5(ID_NAMESPACE, f"{req}:{time.time_ns()}").hex
        ttl = self._settings.task_ttl_seconds
        record = {
            "task_id": task_id,
            "kind": kind,
            "status": TaskStatus.QUEUED.value,
            "result": None,
            "error": None,
            "user_id": user_id or identity.get("user_id"),
            "idem_key": idem_key,
            "created_at": accepted_at,
            "updated_at": accepted_at,
        }
        # The record exists before the pointer, so a pointer always names a readable task.
        await self._redis.set(self._task_prefix + task_id, json.dumps(record), ex=ttl)
        if not await self._redis.set(idem_key, task_id, nx=True, ex=ttl):
            existing = await self._redis.get(idem_key)
            if existing is not None and await self._redis.exists(self._task_prefix + existing.decode()):
                await self._redis.delete(self._task_prefix + task_id)
                log.info("task_deduplicated", task_id=existing.decode())
                return str(existing.decode())
            await self._redis.set(idem_key, task_id, ex=ttl)  # stale pointer: take it over
        job = await self._redis.enqueue_job(
            JOB_FUNCTION,
            task_id,
            {"kind": kind, "accepted_at": accepted_at, **payload},
            _job_id=task_id,
            _expires=ttl,
        )
        if job is None:  # pragma: no cover - task ids are unique per acceptance
            log.warning("job_already_exists", task_id=task_id)
        log.info("task_enqueued", task_id=task_id, kind=kind)
        return task_id

    async def status(self, task_id: str) -> TaskResponse:
        raw = await self._guard("status", self._redis.get(self._task_prefix + task_id))
        if raw is None:
            raise NotFound(f"unknown task id '{task_id}' (task records expire after TASK_TTL_SECONDS)")
        rec = json.loads(raw)
        return TaskResponse(task_id=task_id, status=rec["status"], result=rec["result"], error=rec["error"])

    async def _update(self, task_id: str, **changes: Any) -> dict[str, Any]:
        key = self._task_prefix + task_id
        raw = await self._redis.get(key)
        rec: dict[str, Any] = json.loads(raw) if raw else {"task_id": task_id, "created_at": now_iso()}
        rec.update(changes, updated_at=now_iso())
        await self._redis.set(key, json.dumps(rec), ex=self._settings.task_ttl_seconds)
        return rec

    async def mark_processing(self, task_id: str, attempt: int) -> None:
        await self._update(task_id, status=TaskStatus.PROCESSING.value, attempt=attempt)

    async def mark_completed(self, task_id: str, result: dict[str, Any]) -> None:
        rec = await self._update(task_id, status=TaskStatus.COMPLETED.value, result=result, error=None)
        await self._release_idem(task_id, rec)

    async def mark_failed(self, task_id: str, error: str) -> None:
        rec = await self._update(task_id, status=TaskStatus.FAILED.value, error=error)
        await self._release_idem(task_id, rec)

    async def _release_idem(self, task_id: str, rec: dict[str, Any]) -> None:
        idem_key = rec.get("idem_key")
        if idem_key:
            await self._release(keys=[idem_key], args=[task_id, self._settings.idempotency_window_seconds])

    async def save_step(self, task_id: str, step: str, value: str) -> None:
        """Keep an intermediate result of a job so that a replay reuses it (LLM output, resolved ids)."""
        await self._redis.set(f"{self._task_prefix}{task_id}:{step}", value, ex=self._settings.task_ttl_seconds)

    async def load_step(self, task_id: str, step: str) -> str | None:
        raw = await self._redis.get(f"{self._task_prefix}{task_id}:{step}")
        return raw.decode() if raw is not None else None

    async def ping(self) -> None:
        await self._guard("ping", self._redis.ping())
