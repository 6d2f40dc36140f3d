"""Accepting writes: a task's record, its pending entry, its idempotency pointer and its ARQ job, in one script.
`TaskQueue` is the queue's front and holds its other parts: `records` (service/tasks/records.py), `leases` (the
reaper, leases.py), `erasure` (erasure.py) and `idempotency` (the Idempotency-Key header's records,
idempotency.py).

Keys (prefixed with ARQ_QUEUE_NAME, so deployments sharing one Redis stay apart):
- `<queue>:task:<task_id>`   JSON status record (with the job, so the reaper can re-enqueue it), lives
  TASK_TTL_SECONDS.
- `<queue>:pending`          sorted set of the tasks not ended yet (score = acceptance time, ms): what
  the reaper looks at.
- `<queue>:lease:<task_id>`  held (with a short TTL, refreshed) while a worker runs the job: a job whose
  lease lapsed while ARQ still marks it in progress belongs to a dead worker.
- `<queue>:idem:<req_hash>`  the task id that answers identical requests; lives while the task is
  pending, then IDEMPOTENCY_WINDOW_SECONDS after it finished (so retries share a task, history
  does not). Its lifetime is independent of both the status record and ARQ's job/result keys.
- `<queue>:utasks:<user_id>` sorted set of the user's task ids (score = acceptance time, µs), the newest
  USER_TASKS_KEPT, written by the accept script itself (so it cannot drift from the records), expiring with
  TASK_TTL_SECONDS after the user's last write; `recent()` reads it (the console's Activity page).

ARQ's own queue (the sorted set workers poll) is ARQ_QUEUE_NAME with WORKER_SHARDS=1, else the queue of the
user's shard (service/tasks/shards.py); every key above stays under ARQ_QUEUE_NAME, so a task reads the same whatever
shard runs it.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, cast

import structlog
from arq.connections import ArqRedis
from arq.constants import job_key_prefix, result_key_prefix
from arq.jobs import serialize_job

from service.core.domain import ID_NAMESPACE, TaskStatus, now_iso
from service.core.errors import DependencyUnavailable
from service.core.kv import RedisKV
from service.core.redis_client import job_serializer
from service.core.settings import RedisQueueSettings
from service.tasks.erasure import Erasure
from service.tasks.idempotency import IdempotencyKeys
from service.tasks.jobs import JobModel
from service.tasks.leases import Leases
from service.tasks.part import RedisPart
from service.tasks.records import USER_TASKS_KEPT, TaskRecords
from service.tasks.scripts import ACCEPT
from service.tasks.shards import queue_name, shard_of

log = structlog.get_logger(__name__)


def request_hash(kind: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps({"kind": kind, **fields}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


class TaskQueue(RedisPart):
    """The API side of writes (accept and enqueue), with the queue's other parts as attributes."""

    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings, functions: Mapping[str, str]) -> None:
        """`functions`: the ARQ function of each job kind (service/registry.py)."""
        super().__init__(redis, settings)
        self._functions = functions
        self._accept = redis.register_script(ACCEPT)
        self.records = TaskRecords(redis, settings)
        self.leases = Leases(redis, settings, self.records, self._submit)
        self.erasure = Erasure(redis, settings)
        self.idempotency = IdempotencyKeys(RedisKV(redis, settings), settings.idempotency_window_seconds)

    async def enqueue(self, job: JobModel, identity: dict[str, Any], *, user_id: str | None = None) -> str:
        """Accept a write: returns the task id (an existing one for a retried identical request)."""
        return await self._guard("enqueue", self._enqueue(job, identity, user_id))

    async def _enqueue(self, job: JobModel, identity: dict[str, Any], user_id: str | None) -> str:
        req = request_hash(job.kind, identity)
        idem_key = self.keys.accepted(req)
        accepted_at = now_iso()
        task_id = uuid.uuid5(ID_NAMESPACE, f"{req}:{time.time_ns()}").hex
        ttl = self._settings.task_ttl_seconds
        job = job.model_copy(update={"accepted_at": accepted_at})
        payload = job.model_dump(mode="json")
        record = {
            "task_id": task_id,
            "kind": job.kind,
            "status": TaskStatus.QUEUED.value,
            "result": None,
            "error": None,
            "user_id": user_id or getattr(job, "user_id", None),
            "idem_key": idem_key,
            "created_at": accepted_at,
            "updated_at": accepted_at,
            "attempt": 0,
            "job": payload,
        }
        # One script, so a crash leaves all of it or none: a retried request finds the live task its pointer
        # names; otherwise the record, the pending entry (the reaper's list), the pointer and the ARQ job.
        now_ms = int(time.time() * 1000)
        serialized = serialize_job(self._functions[job.kind], (task_id, payload), {}, None, now_ms,
                                   serializer=job_serializer)
        owner = str(record["user_id"] or "") or None
        keys = [self.keys.task(task_id), self.keys.pending, idem_key, job_key_prefix + task_id,
                result_key_prefix + task_id, self.queue_of(owner), self.keys.shard_counts,
                self.keys.user_tasks(owner or "")]
        args: list[Any] = [json.dumps(record), now_ms, task_id, ttl, serialized, ttl * 1000, now_ms,
                           self.keys.task_prefix,
                self._settings.worker_shards, USER_TASKS_KEPT if owner else 0, time.time_ns() // 1000]
        replicas = self._wait_replicas
        if replicas:
            existing = await self._accept_replicated(keys, args, replicas)
        else:
            existing = await self._accept(keys=keys, args=args)
        if existing is not None:
            log.info("task_deduplicated", task_id=existing.decode())
            return str(existing.decode())
        log.info("task_enqueued", task_id=task_id, kind=job.kind)
        return task_id

    async def _accept_replicated(self, keys: list[str], args: list[Any], replicas: int) -> bytes | None:
        """The accept script, then Redis WAIT on the same connection: answered only once `replicas` replicas hold
        the write, so a failover cannot lose an acknowledged task. Fewer in time: 503, and the client's retry of
        the same request finds this task through its idempotency pointer (it is not accepted twice)."""
        wait_ms = self._wait_ms
        pipe = self._redis.pipeline(transaction=False)
        await self._accept(keys=keys, args=args, client=pipe)
        pipe.execute_command("WAIT", replicas, wait_ms)
        existing, acked = await pipe.execute()
        if int(acked) < replicas:
            log.warning("accept_not_replicated", acked=int(acked), wanted=replicas, wait_ms=wait_ms)
            raise DependencyUnavailable(f"redis: the write reached {acked} of {replicas} replica(s) in {wait_ms} ms")
        return cast(bytes | None, existing)

    def queue_of(self, user_id: str | None) -> str:
        """The ARQ queue of a user's jobs (the queue of the user's shard; service/tasks/shards.py)."""
        shards = self._settings.worker_shards
        return queue_name(self._settings.queue_name, shard_of(user_id, shards), shards)

    async def _submit(self, task_id: str, job: dict[str, Any], job_try: int | None = None,
                      user_id: str | None = None) -> bool:
        """The job again in ARQ (the reaper's re-enqueue of a job that is gone)."""
        submitted = await self._redis.enqueue_job(
            self._functions[job["kind"]], task_id, job, _job_id=task_id, _expires=self._settings.task_ttl_seconds,
            _job_try=job_try, _queue_name=self.queue_of(user_id or job.get("user_id")),
        )
        return submitted is not None

    async def ping(self) -> None:
        await self._guard("ping", self._redis.ping())
