"""The ARQ worker(s) of one process, supervised: if Redis goes away (a restart, a Sentinel failover) a worker is
rebuilt once it is back, so a Redis restart never needs a process restart. `worker_options` are the ARQ options of
one shard's worker, shared with `arq worker.WorkerSettings` (worker/__init__.py).

One ARQ worker per shard this process consumes (service/tasks/shards.py; all of them unless told otherwise), on the
process's one set of clients: a user's jobs all reach this process's graph writer, which coalesces them. The
embedded profile runs this in the API process (or its worker child); `python -m worker` runs it standalone
(worker/__main__.py)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from arq.worker import func
from redis.exceptions import RedisError

from service.core.errors import DependencyUnavailable
from service.core.heap import freeze_startup_heap, track_gc_pauses
from service.core.logging import configure_logging
from service.core.redis_client import connect_redis, job_deserializer, job_serializer, redis_settings
from service.core.settings import Settings
from service.deps import Deps, build_deps
from service.registry import JOB_KINDS
from service.tasks.shards import queue_name
from worker.claiming import ClaimingWorker
from worker.crons import cron_jobs
from worker.handlers import worker_context
from worker.jobs import arq_function

log = structlog.get_logger(__name__)


def worker_options(settings: Settings, shard: int = 0) -> dict[str, Any]:
    """The options of a worker of one shard's queue (service/tasks/shards.py); the workers of shard 0 also schedule the
    crons, so they run once per deployment whatever WORKER_SHARDS is."""
    # ARQ's own try limit is only a backstop: the wrapper (worker/jobs.py) retries against WRITE_RETRY_BUDGET_SECONDS
    # (each retry waits at least a second) and the reaper ends a job whose worker keeps dying (ARQ_MAX_RETRIES).
    backstop = arq_tries(settings)
    return {
        "functions": [func(arq_function(k), name=k.function, max_tries=k.retry.tries(backstop)) for k in JOB_KINDS],
        "cron_jobs": cron_jobs(settings) if shard == 0 else [],
        "redis_settings": redis_settings(settings.redis),
        "queue_name": queue_name(settings.redis.queue_name, shard, settings.redis.worker_shards),
        "max_jobs": settings.redis.max_jobs,
        "poll_delay": settings.redis.poll_delay_seconds,
        "job_timeout": settings.redis.job_timeout,
        "max_tries": backstop,
        # Our status records live in <queue>:task:*. ARQ's own result would keep the job's arguments
        # (the memory's content) after a delete: none is kept.
        "keep_result": 0,
        "job_serializer": job_serializer,
        "job_deserializer": job_deserializer,
        "health_check_interval": 30,
    }


def arq_tries(settings: Settings) -> int:
    """The try limit ARQ enforces itself: more than the retry budget can use up, plus the lost attempts allowed."""
    return int(settings.writepath.retry_budget_seconds) + settings.redis.max_tries + 10


class EmbeddedWorker:
    def __init__(self, deps: Deps, shards: list[int] | None = None) -> None:
        self._deps = deps
        self._context = worker_context(deps)  # each worker gets its copy (ARQ adds to it)
        self.shards = shards if shards is not None else list(range(deps.settings.redis.worker_shards))
        self._workers: dict[int, ClaimingWorker] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._supervise(shard), name=f"arq-worker-shard-{shard}")
                       for shard in self.shards]

    async def _supervise(self, shard: int) -> None:
        settings = self._deps.settings
        queue = queue_name(settings.redis.queue_name, shard, settings.redis.worker_shards)
        delay = 0.5
        while not self._stopping:
            self._workers[shard] = ClaimingWorker(
                **worker_options(settings, shard), ctx=dict(self._context), handle_signals=False,
                connect=lambda: connect_redis(settings.redis, queue), monitor=self._deps.loop,
            )
            log.info("embedded_worker_started", queue=queue, shard=shard)
            try:
                await self._workers[shard].async_run()
                delay = 0.5
            except (RedisError, OSError, DependencyUnavailable) as exc:
                log.warning("embedded_worker_lost_redis", error=str(exc), retry_in_s=delay, shard=shard)
            await self._close_worker(shard)
            if not self._stopping:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _close_worker(self, shard: int) -> None:
        worker = self._workers.pop(shard, None)
        if worker is None:
            return
        try:
            # Cancels in-flight jobs; ARQ keeps them queued and reruns them later.
            await worker.close()
        except (RedisError, OSError) as exc:
            log.warning("embedded_worker_close_failed", error=str(exc), shard=shard)
        except asyncio.CancelledError:
            if not self._stopping:
                raise

    async def stop(self) -> None:
        self._stopping = True
        await asyncio.gather(*(self._close_worker(shard) for shard in list(self._workers)))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        log.info("embedded_worker_stopped")


async def open_deps(settings: Settings) -> Deps:
    """A standalone worker's clients, metrics server and heap settings (`python -m worker`, `arq`)."""
    configure_logging(settings.service)
    if settings.qdrant.url is None:
        raise SystemExit(
            "error: a standalone worker needs QDRANT_URL (a Qdrant server); in the embedded profile the "
            "API runs the worker in-process - start it with ./scripts/dev.sh or python -m service"
        )
    deps = await build_deps(settings, role="worker")
    if settings.metrics.worker_port:
        from prometheus_client import start_http_server

        start_http_server(settings.metrics.worker_port)  # the same metrics as the API's /metrics
    track_gc_pauses()
    freeze_startup_heap()  # only `python -m worker` / `arq` run this start-up (service/core/heap.py)
    return deps


async def serve(clients: Callable[[], Awaitable[Deps]], shards: list[int] | None, *,
                started: Callable[[EmbeddedWorker], None] = lambda worker: None,
                orphaned: Callable[[], bool] = lambda: False) -> int:
    """A worker process's life (`python -m worker`: worker/__main__.py; the worker child: worker/child.py): SIGTERM
    and SIGINT handled from the start, the clients, the shards' workers, then one turn a second until a signal or
    `orphaned()`; running jobs are cancelled and stay queued, and the clients are closed."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    deps = await clients()
    worker = EmbeddedWorker(deps, shards)
    worker.start()
    started(worker)
    try:
        for _ in range(10**9):  # bounded; one turn a second
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            if stop.is_set() or orphaned():
                break
    finally:
        await worker.stop()
        await deps.close()
    return 0
