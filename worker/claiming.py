"""ARQ's Worker with two changes: the jobs of a poll are claimed in one Redis script, not one by one, and `close`
waits for every job whatever it ended with (see `close`).

ARQ's `start_jobs` walks the ids it read from the queue (up to `queue_read_limit`, 5 x `max_jobs`) one at a
time: WATCH, EXISTS, ZSCORE, then MULTI / PSETEX / EXEC, four round trips per id, including the ids of the jobs
this worker is already running (they stay in the queue until they finish). On a busy event loop each round
trip waits for the loop, so the worker started new jobs slower than it finished them and ran far fewer than
`max_jobs` (docs/benchmarks.md). Here one script checks every candidate
as ARQ does (in the queue, due, not in progress) and sets its in-progress key, atomically, in one round trip;
then the jobs start as ARQ starts them (`run_job`, the same semaphore and counter).

It relies on ARQ 0.28's key layout (`arq.constants`) and on `start_jobs` being the hook `_poll_iteration`
calls; tests/integration/test_claiming_worker.py pins the behaviour, so an ARQ upgrade that changes either
fails there.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms
from arq.worker import Worker
from redis.commands.core import AsyncScript

from service.core.loop import LoopMonitor

log = structlog.get_logger(__name__)

# KEYS[1]: the queue (sorted set). ARGV: now (ms), in-progress timeout (ms), the in-progress key prefix, how many to
# claim at most, then the candidate job ids in queue order. Returns the claimed ids and their scores, flattened.
_CLAIM = """
local out = {}
local now = tonumber(ARGV[1])
local most = tonumber(ARGV[4])
for i = 5, #ARGV do
    if #out >= 2 * most then break end
    local id = ARGV[i]
    local score = redis.call('ZSCORE', KEYS[1], id)
    if score and tonumber(score) <= now and redis.call('EXISTS', ARGV[3] .. id) == 0 then
        redis.call('PSETEX', ARGV[3] .. id, ARGV[2], '1')
        out[#out + 1] = id
        out[#out + 1] = score
    end
end
return out
"""


class ClaimingWorker(Worker):
    def __init__(self, *args: Any, connect: Callable[[], Awaitable[ArqRedis]] | None = None,
                 monitor: LoopMonitor | None = None, **kwargs: Any) -> None:
        """`connect`: how the worker opens its Redis client (service/tasks/queue.py `connect_redis`, which knows
        Sentinel's password and timeouts); without it, ARQ's own from `redis_settings`. `monitor`: the process's
        event-loop monitor: while the loop lags, fewer jobs start (back-pressure, service/core/loop.py)."""
        super().__init__(*args, **kwargs)
        self._claim: AsyncScript | None = None
        self._connect = connect
        self._monitor = monitor

    async def main(self) -> None:
        if self._pool is None and self._connect is not None:
            self._pool = await self._connect()
        await super().main()

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        allowed = self._monitor.concurrency(self.max_jobs) if self._monitor is not None else self.max_jobs
        free = allowed - self.job_counter
        # Every id of the poll not running here, not just `free` of them: the first ones may be running in other
        # workers (server profile, N workers on one queue); the script claims at most `free`.
        candidates: list[str] = []
        for raw in job_ids:
            job_id = raw.decode()
            running = self.tasks.get(job_id)
            if running is None or running.done():  # our own running jobs stay in the queue until they end
                candidates.append(job_id)
        if free <= 0 or not candidates:
            return
        if self._claim is None:
            self._claim = self.pool.register_script(_CLAIM)
        claimed = await self._claim(keys=[self.queue_name], args=[
            timestamp_ms(), int(self.in_progress_timeout_s * 1000), in_progress_key_prefix, free, *candidates])
        for i in range(0, len(claimed), 2):
            job_id, score = claimed[i].decode(), int(float(claimed[i + 1]))
            await self.sem.acquire()  # free > 0: does not wait
            self.job_counter += 1
            task = self.loop.create_task(self.run_job(job_id, score))
            task.add_done_callback(lambda _: self._job_ended())
            self.tasks[job_id] = task
        if self._monitor is not None:
            self._monitor.note_jobs(self.job_counter)

    def _job_ended(self) -> None:
        self._release_sem_dec_counter_on_complete()
        if self._monitor is not None:
            self._monitor.note_jobs(self.job_counter)

    async def close(self) -> None:
        """ARQ's `close` (cancel the running jobs, wait for them, drop the health key, close the pool), except that
        every job is waited for whatever it ended with, and the pool is closed even when Redis is gone. ARQ gathers
        the jobs without `return_exceptions`: a job cancelled while it was finishing (inside `asyncio.shield`
        around its final Redis write) ends with CancelledError, which `close` then raised, leaving the other jobs
        running and the pool open; in the embedded worker that CancelledError also ended the shard's supervisor,
        and the shard's jobs waited forever (seen once in the Redis failover test)."""
        if not self._handle_signals:
            self.handle_sig(signal.SIGUSR1)
        if self._pool is None:
            return
        try:
            ended = await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            badly = [f"{type(e).__name__}: {e}"[:200] for e in ended if isinstance(e, BaseException)]
            if badly:
                log.warning("worker_jobs_ended_badly_on_close", jobs=len(badly), errors=badly[:5])
            await self._pool.delete(self.health_check_key)
            if self.on_shutdown:
                await self.on_shutdown(self.ctx)
        finally:
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.aclose(close_connection_pool=True)
