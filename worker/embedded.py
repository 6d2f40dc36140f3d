"""The embedded profile's in-process ARQ worker, supervised: if Redis goes away the worker is
rebuilt once it is back, so a Redis restart never needs an API restart."""

from __future__ import annotations

import asyncio
import contextlib

import structlog
from redis.exceptions import RedisError

from service.deps import Deps
from worker.claiming import ClaimingWorker
from worker.settings import worker_options

log = structlog.get_logger(__name__)


class EmbeddedWorker:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._worker: ClaimingWorker | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name="arq-embedded-worker")

    async def _supervise(self) -> None:
        delay = 0.5
        while not self._stopping:
            self._worker = ClaimingWorker(
                **worker_options(self._deps.settings), ctx={"deps": self._deps}, handle_signals=False
            )
            log.info("embedded_worker_started", queue=self._deps.settings.arq_queue_name)
            try:
                await self._worker.async_run()
                delay = 0.5
            except (RedisError, OSError) as exc:
                log.warning("embedded_worker_lost_redis", error=str(exc), retry_in_s=delay)
            await self._close_worker()
            if not self._stopping:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _close_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        try:
            # Cancels in-flight jobs; ARQ keeps them queued and reruns them later.
            await worker.close()
        except (RedisError, OSError) as exc:
            log.warning("embedded_worker_close_failed", error=str(exc))
        except asyncio.CancelledError:
            if not self._stopping:
                raise

    async def stop(self) -> None:
        self._stopping = True
        await self._close_worker()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        log.info("embedded_worker_stopped")
