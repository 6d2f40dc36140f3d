"""Leases and the reaper. A worker holds `<queue>:lease:<id>` (TASK_LEASE_SECONDS, refreshed) while it runs a task's
job; the reaper looks at the tasks pending longer than a while (`<queue>:pending`) and re-enqueues a job that is
gone, releases one whose worker died (ARQ still marks it in progress, its lease lapsed), or fails the task once its
tries are spent. An attempt its worker's stop or death interrupted is forgiven, not counted as a try."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix, retry_key_prefix

from service.core.domain import TaskStatus
from service.core.kv import aw
from service.core.settings import RedisQueueSettings
from service.tasks.part import ENDED, RedisPart
from service.tasks.shards import queue_names

if TYPE_CHECKING:
    from service.tasks.records import TaskRecords

log = structlog.get_logger(__name__)

# Attempts of a task that its worker's stop or death interrupted and that are not tries (forgive_interruption).
INTERRUPTIONS_FORGIVEN = 10
# (task id, job, ARQ's try number, user id) -> whether ARQ took the job again
Resubmit = Callable[[str, dict[str, Any], int, str | None], Awaitable[bool]]


class Leases(RedisPart):
    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings, records: TaskRecords,
                 resubmit: Resubmit) -> None:
        super().__init__(redis, settings)
        self._records = records
        self._submit = resubmit

    async def hold_lease(self, task_id: str, token: str) -> None:
        await self._guard("lease", self._redis.set(self.keys.lease(task_id), token,
                                                       ex=self._settings.task_lease_seconds))

    async def drop_lease(self, task_id: str) -> None:
        await self._guard("lease", self._redis.delete(self.keys.lease(task_id)))

    async def pending_count(self) -> int:
        return int(await self._guard("pending", self._redis.zcard(self.keys.pending)))

    async def queued_jobs(self) -> int:
        """Jobs in ARQ's queues (waiting or deferred), every shard's."""
        async def run() -> int:
            pipe = self._redis.pipeline(transaction=False)
            for name in queue_names(self._settings.queue_name, self._settings.worker_shards):
                pipe.zcard(name)
            return sum(int(n) for n in await pipe.execute())

        return await self._guard("queue depth", run())

    async def oldest_pending_age_s(self) -> float:
        first = aw(self._redis.zrange(self.keys.pending, 0, 0, withscores=True))
        oldest: list[Any] = await self._guard("pending", first)
        return max(0.0, time.time() - oldest[0][1] / 1000) if oldest else 0.0

    async def is_pending(self, task_id: str) -> bool:
        return await self._guard("pending", self._redis.zscore(self.keys.pending, task_id)) is not None

    async def reap(self, *, older_than_s: float = 30.0, limit: int = 1000) -> dict[str, int]:
        """Tasks not ended whose ARQ job is gone or belongs to a dead worker.

        - job gone (ARQ ended it without our code: its worker died on the last try, or the job vanished
          from Redis): re-enqueued while tries remain, else failed with `lost: ...`;
        - job still marked in progress by ARQ but its lease lapsed (the worker was killed): ARQ's
          in-progress mark is dropped so the job runs again now instead of after ARQ_JOB_TIMEOUT.
        """
        counts = {"requeued": 0, "failed": 0, "released": 0, "ended": 0, "discarded": 0}
        cutoff = (time.time() - older_than_s) * 1000
        ids = await self._guard("reap", self._redis.zrangebyscore(self.keys.pending, 0, cutoff, start=0, num=limit))
        for raw_id in ids:
            task_id = raw_id.decode()
            outcome: str | None = await self._guard("reap", self._reap_one(task_id))
            if outcome:
                counts[outcome] += 1
        if any(counts.values()):
            log.warning("reaper_ran", **counts)
        return counts

    async def forgive_interruption(self, task_id: str) -> bool:
        """An attempt that ended because its worker stopped (its close cancelled the job) or died (the reaper found
        its lease lapsed) is not one of the job's tries: ARQ's try counter for the job goes back by one. Tries are
        for the job's own failures; without this, a service restarted a few times in a row (a crash loop, a rolling
        restart) failed jobs that never failed, with their memories already stored. At most INTERRUPTIONS_FORGIVEN
        a task (counted in its record's `interrupted`), so a job that kills its worker every time still ends. False,
        and nothing changed, when the task has ended or used its allowance."""
        forgiven = await self._guard("forgive", self._forgive(task_id))
        if forgiven:
            log.info("attempt_forgiven", task_id=task_id)
        return forgiven

    async def _forgive(self, task_id: str) -> bool:
        raw = await self._redis.get(self.keys.task(task_id))
        rec: dict[str, Any] | None = json.loads(raw) if raw else None
        if rec is None or rec.get("status") in ENDED or int(rec.get("interrupted") or 0) >= INTERRUPTIONS_FORGIVEN:
            return False
        rec["interrupted"] = int(rec.get("interrupted") or 0) + 1
        tries = int(await self._redis.get(retry_key_prefix + task_id) or 0)
        pipe = self._redis.pipeline(transaction=False)
        pipe.set(self.keys.task(task_id), json.dumps(rec), keepttl=True)
        if tries > 0:
            pipe.decr(retry_key_prefix + task_id)
        await pipe.execute()
        return True

    async def _reap_one(self, task_id: str) -> str | None:
        raw = await self._redis.get(self.keys.task(task_id))
        rec: dict[str, Any] | None = json.loads(raw) if raw else None
        if rec is None or rec.get("status") in ENDED:
            await self._redis.zrem(self.keys.pending, task_id)
            return "ended"
        lost = int(rec.get("lost") or 0)  # attempts lost with their worker, past the forgiven ones (the reaper's count)
        if await self._redis.exists(job_key_prefix + task_id):
            if (await self._redis.exists(in_progress_key_prefix + task_id)
                    and not await self._redis.exists(self.keys.lease(task_id))
                    and _age_s(rec.get("updated_at")) > self._settings.task_lease_seconds):
                # Its worker died: that attempt was not a try. Forgiven first: once ARQ's mark is gone, another worker
                # may claim the job and write its record.
                forgiven = await self._forgive(task_id)
                if not forgiven and lost + 1 >= self._settings.max_tries:
                    log.error("reaper_failed_task", task_id=task_id, attempt=rec.get("attempt"), lost=lost + 1)
                    died = lost + 1 + INTERRUPTIONS_FORGIVEN
                    await self._records.mark_failed(task_id, f"lost: its worker died {died} times while running it")
                    await self._redis.delete(in_progress_key_prefix + task_id, job_key_prefix + task_id)
                    return "failed"
                if not forgiven:
                    await self._redis.set(self.keys.task(task_id), json.dumps({**rec, "lost": lost + 1}),
                                          keepttl=True)
                await self._redis.delete(in_progress_key_prefix + task_id)
                log.warning("reaper_released_job", task_id=task_id, attempt=rec.get("attempt"), forgiven=forgiven)
                return "released"
            return None
        idem_key = rec.get("idem_key")
        if (idem_key and rec.get("status") == TaskStatus.QUEUED.value
                and await self._redis.get(idem_key) != task_id.encode()):
            await self._discard(task_id)  # accepted half-way by a process that died: never answered
            log.warning("reaper_discarded", task_id=task_id)
            return "discarded"
        attempt = int(rec.get("attempt") or 0)
        job = rec.get("job")
        if job is not None and lost + 1 < self._settings.max_tries:
            await self._redis.delete(result_key_prefix + task_id)
            await self._redis.set(self.keys.task(task_id), json.dumps({**rec, "lost": lost + 1}), keepttl=True)
            if await self._submit(task_id, job, attempt + 1, rec.get("user_id")):
                log.warning("reaper_requeued", task_id=task_id, attempt=attempt, lost=lost + 1)
                return "requeued"
            return None
        reason = (f"lost: the job ended without finishing {lost + 1} time(s), after {attempt} attempt(s) "
                  "(its worker died, or the job vanished from Redis)")
        log.error("reaper_failed_task", task_id=task_id, attempt=attempt, lost=lost + 1)
        await self._records.mark_failed(task_id, reason)
        return "failed"

    async def _discard(self, task_id: str) -> None:
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(self.keys.task(task_id))
        pipe.zrem(self.keys.pending, task_id)
        await pipe.execute()



def _age_s(stamp: Any) -> float:
    try:
        return (datetime.now(UTC) - datetime.fromisoformat(str(stamp))).total_seconds()
    except ValueError:
        return float("inf")
