"""ARQ cron jobs: the dedup sweep, the reconciler's drain + reaper, the daily full reconcile and the tiers'
retention.

`unique` makes ARQ enqueue one job per scheduled time however many workers run; with WORKER_SHARDS > 1 only the
workers of shard 0 schedule them (worker/embedded.py `worker_options`). Cron jobs get the
worker's ARQ_JOB_TIMEOUT (a longer cron timeout would also delay ARQ's rerun of every crashed job).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from arq.cron import CronJob, cron

from service.conversations.writes import drain_pending_erasures, expire_tiers
from service.core.domain import ID_NAMESPACE
from service.core.errors import DependencyUnavailable
from service.core.settings import Settings
from service.deps import Deps
from service.graph_api.jobs import CommunityJob
from service.maintenance.records import summary
from service.registry import JobHandlers
from service.tasks.drain import rehome

log = structlog.get_logger(__name__)


async def tier_retention_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Daily: messages older than MESSAGE_RETENTION_DAYS and runs older than RUN_RETENTION_DAYS are erased (the
    runs and conversations tiers; their job kinds are in service/registry.py)."""
    deps: Deps = ctx["deps"]
    try:
        return await expire_tiers(deps.settings.retention, deps.graph)
    except DependencyUnavailable as exc:
        log.warning("tier_retention_failed", error=str(exc)[:300])
        return None


def cron_run_id(job_id: str, kind: str = "dedup") -> str:
    """Cron runs get an id derived from ARQ's job id (unique per scheduled time)."""
    return uuid.uuid5(ID_NAMESPACE, f"{kind}-cron:{job_id}").hex


async def dedup_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """The scheduled sweep (every user, real run). A run still going makes this one skip (logged)."""
    handlers: JobHandlers = ctx["handlers"]
    run_id = cron_run_id(str(ctx.get("job_id") or time.time_ns()))
    structlog.contextvars.bind_contextvars(task_id=run_id)
    try:
        report = await handlers.sweep.run(run_id, trigger="cron")
        return summary(report)
    except DependencyUnavailable as exc:
        log.error("dedup_cron_failed", run_id=run_id, error=str(exc))
        return None
    finally:
        structlog.contextvars.unbind_contextvars("task_id")


async def reconcile_tick(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Every RECONCILE_INTERVAL_SECONDS (and at worker start): end lost tasks, drain the outbox."""
    deps: Deps = ctx["deps"]
    handlers: JobHandlers = ctx["handlers"]
    try:
        reaped = await deps.tasks.leases.reap(older_than_s=max(2.0 * deps.settings.redis.task_lease_seconds,
                                                        deps.settings.writepath.reconcile_grace_seconds))
        drained = await handlers.reconciler.drain()
        await drain_pending_erasures(deps.settings.redis, deps.tasks, deps.graph)  # messages, runs
        await rehome(deps.redis, deps.settings.redis)  # jobs left on another WORKER_SHARDS's queues
    except DependencyUnavailable as exc:
        log.warning("reconcile_tick_failed", error=str(exc)[:300])
        return None
    return {"reaped": reaped, "drained": drained}


async def reconcile_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """The daily full Qdrant <-> Neo4j comparison of every user."""
    handlers: JobHandlers = ctx["handlers"]
    run_id = cron_run_id(str(ctx.get("job_id") or time.time_ns()), "reconcile")
    try:
        report = await handlers.reconciler.full(run_id, trigger="cron")
    except DependencyUnavailable as exc:
        log.error("reconcile_cron_failed", run_id=run_id, error=str(exc))
        return None
    return {"run_id": run_id, "status": report.status, "repairs": report.repairs}


async def optimize_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Every 10 minutes: when OPTIMIZE_MIN_UNINDEXED points were written or deleted since the last vector index
    build, build it again (Qdrant Edge: in a child process, then swapped in, which also drops deleted points;
    a Qdrant server indexes and vacuums by itself, so its backlog is 0)."""
    deps: Deps = ctx["deps"]
    threshold = deps.settings.qdrant.optimize_min_unindexed
    backlog = await deps.vectors.index_backlog()
    running: set[asyncio.Task[bool]] = ctx.setdefault("index_builds", set())
    if not threshold or backlog < threshold or running:
        return None
    # In the background: a build takes minutes, and a cron job's timeout would stretch ARQ's in-progress
    # lock of every job (it is the longest function timeout + 10 s). The store's close() cancels it.
    build = asyncio.create_task(deps.vectors.optimize())
    running.add(build)
    build.add_done_callback(_build_done(running))
    return {"backlog": backlog, "started": True}


def _build_done(running: set[asyncio.Task[bool]]) -> Callable[[asyncio.Task[bool]], None]:
    def done(task: asyncio.Task[bool]) -> None:
        running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("index_build_failed", error=str(task.exception()))

    return done


async def observation_ttl_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Daily: agent observations older than OBSERVATION_TTL_DAYS are deleted (through the queue)."""
    deps: Deps = ctx["deps"]
    try:
        return {"queued": await deps.maintenance.expire_observations()}
    except DependencyUnavailable as exc:
        log.warning("observation_ttl_failed", error=str(exc)[:300])
        return None


async def trace_ttl_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Hourly: retrieval traces past TRACE_TTL_DAYS are removed (reads already hide them)."""
    deps: Deps = ctx["deps"]
    try:
        return {"removed": await deps.traces.purge_traces()}
    except DependencyUnavailable as exc:
        log.warning("trace_ttl_failed", error=str(exc)[:300])
        return None


async def communities_cron(ctx: dict[str, Any]) -> dict[str, Any] | None:
    """Daily: every user's entity communities rebuilt (service/graph_api/communities.py)."""
    handlers: JobHandlers = ctx["handlers"]
    try:
        return await handlers.communities.run(cron_run_id(str(ctx.get("job_id") or time.time_ns()), "communities"),
                                              CommunityJob())
    except DependencyUnavailable as exc:
        log.warning("communities_cron_failed", error=str(exc)[:300])
        return None


def cron_jobs(settings: Settings) -> list[CronJob]:
    every, hour = settings.writepath.reconcile_interval_seconds, settings.writepath.reconcile_cron_hour
    jobs = [
        cron(reconcile_tick, name="reconcile_tick", second=set(range(0, 60, every)), unique=True,
             run_at_startup=True, max_tries=1),
    ]
    if settings.qdrant.optimize_min_unindexed:
        jobs.append(cron(optimize_cron, name="optimize_cron", minute=set(range(0, 60, 10)), unique=True,
                         run_at_startup=False, max_tries=1))
    if settings.writepath.reconcile_cron_enabled:
        jobs.append(cron(reconcile_cron, name="reconcile_cron", hour=hour, minute=30,
                         unique=True, run_at_startup=False, max_tries=1))
    if settings.hooks.observation_ttl_days > 0:
        jobs.append(cron(observation_ttl_cron, name="observation_ttl", hour=hour, minute=45,
                         unique=True, run_at_startup=False, max_tries=1))
    jobs.append(cron(trace_ttl_cron, name="trace_ttl", minute=50, unique=True, run_at_startup=False, max_tries=1))
    if settings.retention.message_retention_days > 0 or settings.retention.run_retention_days > 0:
        jobs.append(cron(tier_retention_cron, name="tier_retention", hour=hour, minute=55,
                         unique=True, run_at_startup=False, max_tries=1))
    if settings.writepath.communities_cron_enabled:
        jobs.append(cron(communities_cron, name="communities_cron", hour=hour, minute=40,
                         unique=True, run_at_startup=False, max_tries=1))
    if settings.dedup.cron_enabled:
        jobs.append(cron(dedup_cron, name="dedup_cron", hour=set(settings.dedup.cron_hours), minute=0, unique=True,
                         run_at_startup=False, max_tries=1))
    return jobs
