"""ARQ job functions. Each job reads its typed deps from `ctx["deps"]`."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from arq import Retry

from service.deps import Deps
from service.errors import DependencyUnavailable, ServiceError
from worker.dedup import run_requested_dedup

log = structlog.get_logger(__name__)


def _deadline(job_timeout: int) -> float:
    """Our own per-job deadline, shorter than ARQ's timeout: a timed-out ARQ job is not retried."""
    return max(1.0, job_timeout - min(10.0, job_timeout * 0.1))


async def process_memory_write(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    deps: Deps = ctx["deps"]
    settings = deps.settings
    attempt = int(ctx.get("job_try", 1))
    structlog.contextvars.bind_contextvars(task_id=task_id, user_id=job.get("user_id"))
    try:
        await deps.tasks.mark_processing(task_id, attempt)
        try:
            async with asyncio.timeout(_deadline(settings.arq_job_timeout)):
                if job["kind"] == "raw":
                    result = await deps.service.store_raw(task_id, job)
                elif job["kind"] == "conversation":
                    result = await deps.service.store_conversation(task_id, job)
                elif job["kind"] == "update":
                    result = await deps.service.apply_update(task_id, job)
                elif job["kind"] == "delete":
                    result = await deps.service.apply_delete(task_id, job)
                elif job["kind"] == "dedup":  # POST /v1/maintenance/dedup; bounds its own time (worker/dedup.py)
                    result = await run_requested_dedup(deps, task_id, job)
                else:
                    raise ValueError(f"unknown job kind '{job['kind']}'")
        except (DependencyUnavailable, TimeoutError) as exc:
            reason = str(exc) or "deadline exceeded"
            if attempt < settings.arq_max_retries:
                defer = min(2**attempt, 30)
                log.warning("job_retry", attempt=attempt, defer_s=defer, reason=reason)
                raise Retry(defer=defer) from exc
            log.error("job_failed", attempt=attempt, reason=reason)
            await deps.tasks.mark_failed(task_id, f"gave up after {attempt} attempts: {reason}")
            return
        except (ServiceError, ValueError, KeyError, TypeError) as exc:  # retrying will not help
            log.exception("job_failed", attempt=attempt)
            await deps.tasks.mark_failed(task_id, f"{type(exc).__name__}: {exc}")
            return
        await deps.tasks.mark_completed(task_id, result)
        log.info("job_completed", attempt=attempt, memories=len(result.get("memories", [])))
    finally:
        structlog.contextvars.unbind_contextvars("task_id", "user_id")
