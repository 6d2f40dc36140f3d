"""ARQ job functions: one per job kind, each a thin call into the service through one wrapper.

The wrapper is where a task's fate is decided, so that every job ends in exactly one of:
- completed (the status record says so, with `result.graph` "stored" or "pending");
- retried through ARQ's `Retry` with backoff, for transient errors (`is_transient`), while tries remain;
- failed, with a readable `error`: everything else, programming errors included (logged with the
  traceback), and transient errors once the tries are used up.
A job the wrapper never saw end (its worker died) is found by the reaper (TaskQueue.reap).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
from arq import Retry
from neo4j.exceptions import DriverError, Neo4jError, TransientError
from pydantic import BaseModel, ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.deps import Deps
from service.errors import DependencyUnavailable, DomainError
from service.jobs import (
    ConversationJob,
    DedupJob,
    DeleteJob,
    ImportJob,
    RawBatchJob,
    RawJob,
    ReconcileJob,
    ReembedJob,
    UpdateJob,
)
from service.maintenance.reembed import Reembedder
from service.maintenance.runs import run_requested_dedup
from service.memory.portability import decode_body
from service.metrics import JOB_DURATION, JOBS
from service.outbox import MemoryBusy
from service.queue import LEASE_TTL_S
from service.reconcile import Reconciler

log = structlog.get_logger(__name__)
J = TypeVar("J", bound=BaseModel)

TRANSIENT: tuple[type[BaseException], ...] = (
    DependencyUnavailable,  # our stores' and Gemini's own mapping of outages, 5xx, 429 and timeouts
    TimeoutError,
    TransientError,  # Neo4j: deadlocks, lock timeouts, leader changes, after the driver's retries
    DriverError,  # Neo4j ServiceUnavailable, SessionExpired
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    MemoryBusy,  # another job held the memory's lock for longer than the lock wait
)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, Neo4jError) and not isinstance(exc, TransientError):
        return False  # ClientError / DatabaseError: the same request fails the same way
    return isinstance(exc, TRANSIENT)


def deadline(job_timeout: int) -> float:
    """Our own per-job deadline, shorter than ARQ's timeout: a timed-out ARQ job is not retried."""
    return max(1.0, job_timeout - min(10.0, job_timeout * 0.1))


def backoff(attempt: int) -> float:
    return float(min(2**attempt, 30))


async def _keep_lease(deps: Deps, task_id: str, token: str) -> None:
    for _ in range(100_000):  # bounded; cancelled when the job ends
        await asyncio.sleep(LEASE_TTL_S / 3)
        with contextlib.suppress(DependencyUnavailable):
            await deps.tasks.hold_lease(task_id, token)


async def run_job(
    ctx: dict[str, Any], task_id: str, raw: dict[str, Any], model: type[J],
    body: Callable[[Deps, str, J], Awaitable[dict[str, Any]]],
) -> None:
    deps: Deps = ctx["deps"]
    settings = deps.settings
    attempt = int(ctx.get("job_try", 1))
    retries_before = (deps.graph.transient_retries, deps.graph.deadlock_retries)
    structlog.contextvars.bind_contextvars(task_id=task_id, user_id=raw.get("user_id"), kind=raw.get("kind"))
    lease: asyncio.Task[None] | None = None
    kind = str(raw.get("kind") or model.__name__)
    started = time.perf_counter()
    outcome = "failed"
    ended = False  # the task's final record is written (which drops the lease too)
    try:
        try:
            job = model.model_validate(raw)
            token = uuid.uuid4().hex
            await deps.tasks.mark_processing(task_id, attempt, token)  # and takes the lease
            lease = asyncio.create_task(_keep_lease(deps, task_id, token), name=f"lease-{task_id}")
            async with asyncio.timeout(deadline(settings.arq_job_timeout)):
                result = await body(deps, task_id, job)
            await _stop(lease)  # the lease stays held (its TTL) until the final record drops it
            await deps.tasks.mark_completed(task_id, result)
            ended = True
        except Exception as exc:
            if is_transient(exc) and attempt < settings.arq_max_retries:
                defer = backoff(attempt)
                log.warning("job_retry", attempt=attempt, defer_s=defer, error=f"{type(exc).__name__}: {exc}"[:500])
                outcome = "retried"
                raise Retry(defer=defer) from exc
            reason = _reason(exc, attempt)
            log.error("job_failed", attempt=attempt, reason=reason, exc_info=not is_transient(exc))
            await _fail(deps, task_id, reason)
            ended = True
            return
        outcome = "completed"
        log.info("job_completed", attempt=attempt, memories=len(result.get("memories", [])),
                 graph=result.get("graph"))
    finally:
        JOBS.labels(kind, outcome).inc()
        JOB_DURATION.labels(kind).observe(time.perf_counter() - started)
        await _stop(lease)
        with contextlib.suppress(DependencyUnavailable):
            if not ended:  # retried, or the final record could not be written: the reaper must see no lease
                await deps.tasks.drop_lease(task_id)
            await deps.tasks.add_stats(
                graph_transient_retries=deps.graph.transient_retries - retries_before[0],
                deadlock_retries=deps.graph.deadlock_retries - retries_before[1],
            )
        structlog.contextvars.unbind_contextvars("task_id", "user_id", "kind")


async def _stop(lease: asyncio.Task[None] | None) -> None:
    if lease is not None:
        lease.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await lease


def _reason(exc: BaseException, attempt: int) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ValidationError):
        text = f"invalid job payload: {exc.error_count()} error(s): {exc.errors()[0].get('msg')}"
    if is_transient(exc):
        return f"gave up after {attempt} attempts: {text}"
    return text


async def _fail(deps: Deps, task_id: str, reason: str) -> None:
    """Mark the task failed; if even that fails (Redis gone), the reaper ends it later."""
    try:
        await deps.tasks.mark_failed(task_id, reason)
    except DependencyUnavailable as exc:
        log.error("job_fail_unrecorded", error=str(exc))
        raise Retry(defer=backoff(1)) from exc


# ---- one ARQ function per job kind ----------------------------------------------------------------


async def _raw(deps: Deps, task_id: str, job: RawJob) -> dict[str, Any]:
    return await deps.service.store_raw(task_id, job)


async def _raw_batch(deps: Deps, task_id: str, job: RawBatchJob) -> dict[str, Any]:
    return await deps.service.store_raw_batch(task_id, job)


async def _conversation(deps: Deps, task_id: str, job: ConversationJob) -> dict[str, Any]:
    return await deps.service.store_conversation(task_id, job)


async def _update(deps: Deps, task_id: str, job: UpdateJob) -> dict[str, Any]:
    return await deps.service.apply_update(task_id, job)


async def _delete(deps: Deps, task_id: str, job: DeleteJob) -> dict[str, Any]:
    return await deps.service.apply_delete(task_id, job)


async def _reconcile(deps: Deps, task_id: str, job: ReconcileJob) -> dict[str, Any]:
    report = await Reconciler(deps.service).full(
        task_id, trigger="api", user_id=job.user_id, dry_run=job.dry_run, task_id=task_id, queued_at=job.accepted_at)
    return {"run_id": report.run_id, "status": report.status, "dry_run": report.dry_run, "repairs": report.repairs,
            "run_url": f"/v1/maintenance/runs/{report.run_id}"}


async def _import(deps: Deps, task_id: str, job: ImportJob) -> dict[str, Any]:
    body = await deps.tasks.load_blob(job.blob)
    if body is None:
        raise DomainError("the uploaded file is gone (uploads are kept for TASK_TTL_SECONDS)")

    async def progress(done: int, total: int) -> None:
        await deps.tasks.set_progress(task_id, done, total)

    result = await deps.service.import_lines(job.user_id, decode_body(body), progress)
    await deps.tasks.drop_blob(job.blob)
    return result


async def _reembed(deps: Deps, task_id: str, job: ReembedJob) -> dict[str, Any]:
    reembedder = Reembedder(deps.settings, deps.tasks, deps.vectors, deps.embedder, deps.service.locks,
                            deps.service.ledger)
    return await reembedder.run(task_id, job)


async def memory_raw(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, RawJob, _raw)


async def memory_raw_batch(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, RawBatchJob, _raw_batch)


async def memory_conversation(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, ConversationJob, _conversation)


async def memory_update(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, UpdateJob, _update)


async def memory_delete(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, DeleteJob, _delete)


async def memory_import(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, ImportJob, _import)


async def maintenance_dedup(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, DedupJob, run_requested_dedup)


async def maintenance_reconcile(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, ReconcileJob, _reconcile)


async def maintenance_reembed(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, ReembedJob, _reembed)


JOB_FUNCTIONS = {
    "memory_raw": memory_raw,
    "memory_raw_batch": memory_raw_batch,
    "memory_conversation": memory_conversation,
    "memory_update": memory_update,
    "memory_delete": memory_delete,
    "maintenance_dedup": maintenance_dedup,
    "maintenance_reconcile": maintenance_reconcile,
    "memory_import": memory_import,
    "maintenance_reembed": maintenance_reembed,
}
