"""ARQ job functions: one per kind of the job registry (service/registry.py), each its handler in one wrapper.

The wrapper is where a task's fate is decided, so that every job ends in exactly one of:
- completed (the status record says so, with `result.graph` "stored" or "pending");
- retried through ARQ's `Retry` with backoff, for transient errors (`is_transient`: a dependency's timeout or outage),
  while WRITE_RETRY_BUDGET_SECONDS has not passed since the task's first such failure; meanwhile its status is
  `retrying`, with the reason, the attempt and when it runs next (docs/write-path.md "Slowness is not an outage");
- failed, with a readable `error`: the data's own faults at once (bad input, a refused request), programming errors
  (logged with the traceback), and transient errors once the budget is spent (the reason names the dependency and
  the time waited).
A job the wrapper never saw end (its worker died) is found by the reaper (TaskQueue.reap). A final record that
cannot be written now is tried in place, then the job runs again later and records it then: never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import structlog
from arq import Retry
from arq.typing import WorkerCoroutine
from pydantic import ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.core.errors import DependencyUnavailable
from service.core.metrics import JOB_DURATION, JOBS
from service.deps import Deps
from service.ledger.outbox import MemoryBusy
from service.registry import JobHandlers, JobKind
from service.stores.failures import TRANSIENT_STORE_ERRORS, refused_by_store
from worker.retry import RetryClock, backoff, dependency_of

log = structlog.get_logger(__name__)

TRANSIENT: tuple[type[BaseException], ...] = (
    DependencyUnavailable,  # our stores' and Gemini's own mapping of outages, 5xx, 429 and timeouts
    TimeoutError,
    *TRANSIENT_STORE_ERRORS,  # the graph database's outages (service/stores/failures.py)
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    MemoryBusy,  # another job held the memory's lock for longer than the lock wait
)


def is_transient(exc: BaseException) -> bool:
    if refused_by_store(exc):
        return False  # the same request fails the same way
    return isinstance(exc, TRANSIENT)


def deadline(job_timeout: int) -> float:
    """Our own per-job deadline, shorter than ARQ's timeout: a timed-out ARQ job is not retried."""
    return max(1.0, job_timeout - min(10.0, job_timeout * 0.1))


async def _keep_lease(deps: Deps, task_id: str, token: str) -> None:
    for _ in range(100_000):  # bounded; cancelled when the job ends
        await asyncio.sleep(deps.settings.redis.task_lease_seconds / 3)
        with contextlib.suppress(DependencyUnavailable):
            await deps.tasks.leases.hold_lease(task_id, token)


async def run_job(ctx: dict[str, Any], task_id: str, raw: dict[str, Any], spec: JobKind) -> None:
    deps: Deps = ctx["deps"]
    handlers: JobHandlers = ctx["handlers"]  # the worker side (worker/handlers.py)
    clock: RetryClock = ctx["retry_clock"]
    settings = deps.settings
    attempt = int(ctx.get("job_try", 1))
    retries_before = (deps.graph.transient_retries, deps.graph.deadlock_retries)
    structlog.contextvars.bind_contextvars(task_id=task_id, user_id=raw.get("user_id"), kind=raw.get("kind"))
    lease: asyncio.Task[None] | None = None
    kind = str(raw.get("kind") or spec.kind)
    started = time.perf_counter()
    outcome = "failed"
    ended = False  # the task's final record is written (which drops the lease too)
    try:
        try:
            job = spec.model.model_validate(raw)
            token = uuid.uuid4().hex
            if not await deps.tasks.records.mark_processing(task_id, attempt, token):  # and takes the lease
                log.warning("job_already_ended", attempt=attempt)  # a second run of an ended task: nothing to do
                outcome, ended = "skipped", True
                return
            lease = asyncio.create_task(_keep_lease(deps, task_id, token), name=f"lease-{task_id}")
            async with asyncio.timeout(deadline(settings.redis.job_timeout)):
                result = await spec.handler(handlers)(task_id, job)
            await _stop(lease)  # the lease stays held (its TTL) until the final record drops it
            await deps.tasks.records.mark_completed(task_id, result)
            ended = True
            clock.forget(task_id)
        except Exception as exc:
            reason = await _retry_or_reason(deps, clock, spec, task_id, attempt, exc)
            if not isinstance(reason, str):  # the seconds until it runs again
                outcome = "retried"
                raise Retry(defer=reason) from exc
            log.error("job_failed", attempt=attempt, reason=reason, exc_info=not is_transient(exc))
            await _fail(deps, task_id, reason)
            clock.forget(task_id)
            ended = True
            return
        outcome = "completed"
        log.info("job_completed", attempt=attempt, memories=len(result.get("memories", [])),
                 graph=result.get("graph"))
    except asyncio.CancelledError:
        # The worker is stopping (its close cancels the running jobs; ARQ runs the job again): not one of its tries.
        outcome = "interrupted"
        with contextlib.suppress(DependencyUnavailable):
            await asyncio.shield(deps.tasks.leases.forgive_interruption(task_id))
        raise
    finally:
        JOBS.labels(kind, outcome).inc()
        JOB_DURATION.labels(kind).observe(time.perf_counter() - started)
        await _stop(lease)
        with contextlib.suppress(DependencyUnavailable):
            if not ended:  # retried, or the final record could not be written: the reaper must see no lease
                await deps.tasks.leases.drop_lease(task_id)
            await deps.kv.add_stats(
                graph_transient_retries=deps.graph.transient_retries - retries_before[0],
                deadlock_retries=deps.graph.deadlock_retries - retries_before[1],
            )
        structlog.contextvars.unbind_contextvars("task_id", "user_id", "kind")


async def _retry_or_reason(deps: Deps, clock: RetryClock, spec: JobKind, task_id: str, attempt: int,
                           exc: BaseException) -> str | float:
    """The seconds until the job runs again (the task's record says `retrying`, and when), else why the task
    fails."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ValidationError):
        return f"invalid job payload: {exc.error_count()} error(s): {exc.errors()[0].get('msg')}"
    if not is_transient(exc):
        return text
    defer = backoff(attempt, deps.settings.writepath.retry_backoff_seconds)
    if spec.retry.max_tries is not None:  # a kind that counts tries instead (the index build: one)
        return defer if attempt < spec.retry.max_tries else f"gave up after {attempt} attempts: {text}"
    dependency = dependency_of(exc)
    since: float | None = None
    try:
        since = await deps.tasks.records.mark_retrying(task_id, attempt, dependency, text[:500], defer)
    except DependencyUnavailable as record_exc:  # Redis is the slow one too: this process's clock decides
        log.warning("job_retry_unrecorded", error=str(record_exc)[:200])
    waited = time.time() - clock.first(task_id, since)
    budget = deps.settings.writepath.retry_budget_seconds
    if waited < budget:
        log.warning("job_retry", attempt=attempt, defer_s=round(defer, 1), waited_s=round(waited, 1),
                    dependency=dependency, error=text[:500])
        return defer
    return (f"gave up after waiting {waited:.0f} s for {dependency} (WRITE_RETRY_BUDGET_SECONDS={budget:.0f}, "
            f"{attempt} attempts): {text}")


async def _stop(lease: asyncio.Task[None] | None) -> None:
    if lease is not None:
        lease.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await lease


async def _fail(deps: Deps, task_id: str, reason: str) -> None:
    """Mark the task failed (tried in place for a while: TaskQueue._end). If Redis still does not answer, the job
    runs again later (ARQ keeps it) and records its end then; the reaper covers a worker that dies meanwhile."""
    try:
        await deps.tasks.records.mark_failed(task_id, reason)
    except DependencyUnavailable as exc:
        log.warning("job_fail_deferred", error=str(exc)[:300], reason=reason[:300])
        raise Retry(defer=backoff(1, deps.settings.writepath.retry_backoff_seconds)) from exc


# ---- one ARQ function per job kind, from the registry ----------------------------------------------


def arq_function(kind: JobKind) -> WorkerCoroutine:
    """The ARQ function of a kind: the wrapper around its handler."""

    async def run(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
        await run_job(ctx, task_id, job, kind)

    run.__name__ = run.__qualname__ = kind.function
    return run

