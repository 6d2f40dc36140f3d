"""ARQ functions of the runs and conversations tiers (issue 28), through the same wrapper as every job
(worker/jobs.py's run_job: leases, deadline, retries, a readable failure)."""

from __future__ import annotations

from typing import Any

import structlog

from service.conversations.service import ConversationService, expire_tiers
from service.deps import Deps
from service.errors import DependencyUnavailable
from service.runs.jobs import ConversationDeleteJob, RunDeleteJob, RunJob
from service.runs.service import RunService
from worker.jobs import run_job

log = structlog.get_logger(__name__)


def _runs(deps: Deps) -> RunService:
    return RunService(deps.settings, deps.tasks, deps.graph, deps.embedder, deps.service.query_embedder)


async def _run(deps: Deps, task_id: str, job: RunJob) -> dict[str, Any]:
    return await _runs(deps).store_run(task_id, job)


async def _run_delete(deps: Deps, task_id: str, job: RunDeleteJob) -> dict[str, Any]:
    return await _runs(deps).delete_run(task_id, job)


async def _conversation_delete(deps: Deps, task_id: str, job: ConversationDeleteJob) -> dict[str, Any]:
    return await ConversationService(deps.settings, deps.tasks, deps.graph).delete_session(task_id, job)


async def run_write(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, RunJob, _run)


async def run_delete(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, RunDeleteJob, _run_delete)


async def conversation_delete(ctx: dict[str, Any], task_id: str, job: dict[str, Any]) -> None:
    await run_job(ctx, task_id, job, ConversationDeleteJob, _conversation_delete)


async def tier_retention_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Daily: messages older than MESSAGE_RETENTION_DAYS and runs older than RUN_RETENTION_DAYS are erased."""
    deps: Deps = ctx["deps"]
    try:
        return await expire_tiers(deps.settings, deps.graph)
    except DependencyUnavailable as exc:
        log.warning("tier_retention_failed", error=str(exc)[:300])
        return None


TIER_FUNCTIONS = {
    "run_write": run_write,
    "run_delete": run_delete,
    "conversation_delete": conversation_delete,
}
