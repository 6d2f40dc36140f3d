"""ClaimingWorker (worker/claiming.py) against real Redis: it claims a poll's jobs in one script, and must keep
ARQ's rules: at most `max_jobs` at once, each job once, never one that another worker holds or that is not due."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.constants import in_progress_key_prefix
from arq.worker import func

from tests.conftest import unique
from worker.claiming import ClaimingWorker

RUNS: dict[str, list[str]] = {}
LIVE: dict[str, int] = {}
PEAK: dict[str, int] = {}


async def record(ctx: dict[str, Any], run: str, name: str) -> None:
    LIVE[run] = LIVE.get(run, 0) + 1
    PEAK[run] = max(PEAK.get(run, 0), LIVE[run])
    await asyncio.sleep(0.02)
    RUNS.setdefault(run, []).append(name)
    LIVE[run] -= 1


async def pool(queue: str) -> ArqRedis:
    return await create_pool(RedisSettings.from_dsn(os.environ["TEST_REDIS_URL"]), default_queue_name=queue)


async def enqueue(redis: ArqRedis, run: str, count: int) -> None:
    for i in range(count):
        await redis.enqueue_job("record", run, f"job-{i}", _job_id=f"{run}-{i}")


def worker(queue: str, **options: Any) -> ClaimingWorker:
    return ClaimingWorker(functions=[func(record, name="record")], redis_settings=RedisSettings.from_dsn(
        os.environ["TEST_REDIS_URL"]), queue_name=queue, poll_delay=0.01, handle_signals=False, keep_result=0,
        **options)


async def test_runs_every_job_once_and_never_more_than_max_jobs() -> None:
    queue, run = unique("test:claim"), unique("run")
    redis = await pool(queue)
    try:
        await enqueue(redis, run, 40)
        w = worker(queue, max_jobs=4, burst=True)
        await asyncio.wait_for(w.main(), 30)
        await w.close()
        assert sorted(RUNS[run]) == sorted(f"job-{i}" for i in range(40))
        assert PEAK[run] <= 4
        assert PEAK[run] >= 2  # it does run several at once
        assert await redis.zcard(queue) == 0
    finally:
        await redis.aclose()


async def test_jobs_held_by_other_workers_or_not_due_are_skipped_and_the_free_ones_run() -> None:
    """More jobs held by other workers at the head of the queue than this worker has slots: it still finds the free
    ones behind them (N workers on one queue, the server profile)."""
    queue, run = unique("test:claim"), unique("run")
    redis = await pool(queue)
    try:
        for i in range(6):
            await redis.enqueue_job("record", run, f"held-{i}", _job_id=f"{run}-held-{i}")
            await redis.psetex(in_progress_key_prefix + f"{run}-held-{i}", 60_000, b"1")  # another worker runs it
        await redis.enqueue_job("record", run, "later", _job_id=f"{run}-later", _defer_by=60)
        for i in range(3):
            await redis.enqueue_job("record", run, f"free-{i}", _job_id=f"{run}-free-{i}")
        w = worker(queue, max_jobs=2)
        main = asyncio.create_task(w.main())
        for _ in range(300):  # bounded: 3 s
            if len(RUNS.get(run, [])) >= 3:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # polls enough to have started the others, were it allowed
        main.cancel()
        await asyncio.gather(main, return_exceptions=True)
        await w.close()
        assert sorted(RUNS[run]) == ["free-0", "free-1", "free-2"]
        assert PEAK[run] <= 2
        assert await redis.zcard(queue) == 7  # the held and the deferred ones wait for their owner / their time
        assert not await redis.exists(in_progress_key_prefix + f"{run}-later")
    finally:
        await redis.aclose()


async def test_two_workers_on_one_queue_share_the_jobs_and_run_each_once() -> None:
    queue, run = unique("test:claim"), unique("run")
    redis = await pool(queue)
    try:
        await enqueue(redis, run, 60)
        workers = [worker(queue, max_jobs=4, burst=True) for _ in range(2)]
        await asyncio.wait_for(asyncio.gather(*(w.main() for w in workers)), 30)
        for w in workers:
            await w.close()
        assert sorted(RUNS[run]) == sorted(f"job-{i}" for i in range(60))  # each once, none lost
        assert PEAK[run] > 4  # both ran jobs at the same time
        assert all(w.jobs_complete > 0 for w in workers)
    finally:
        await redis.aclose()


async def test_close_while_a_job_finishes_waits_for_it_and_does_not_raise() -> None:
    """ARQ's own close raised CancelledError when a job was cancelled while it finished (its final Redis write, inside
    asyncio.shield), and left the pool open; in the embedded worker that ended the shard's supervisor for good.
    Here Redis holds the job's final write (CLIENT PAUSE WRITE) while the worker closes."""
    queue, run = unique("test:claim"), unique("run")
    redis = await pool(queue)
    returned = asyncio.Event()

    async def pause_then_return(ctx: dict[str, Any]) -> str:
        await redis.client_pause(700, all=False)  # writes wait 0.7 s: ARQ's finish_job too
        returned.set()
        return "done"

    w = ClaimingWorker(functions=[func(pause_then_return, name="pause")], redis_settings=RedisSettings.from_dsn(
        os.environ["TEST_REDIS_URL"]), queue_name=queue, poll_delay=0.01, handle_signals=False, keep_result=0)
    try:
        await redis.enqueue_job("pause", _job_id=f"{run}-0")
        main = asyncio.create_task(w.main())
        await asyncio.wait_for(returned.wait(), 10)
        await asyncio.sleep(0.1)  # ARQ now waits on the paused Redis in finish_job
        job = w.tasks[f"{run}-0"]
        assert not job.done()
        await asyncio.wait_for(w.close(), 10)  # ARQ's close raised CancelledError here
        assert job.cancelled()  # the case: the job ended cancelled, and close still returned
        assert w._pool is None  # the pool is closed
        main.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await main
    finally:
        await redis.client_unpause()
        await redis.aclose()
