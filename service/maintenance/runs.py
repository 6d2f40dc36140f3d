"""Entry points of maintenance runs that the API and the worker call (`MaintenanceRuns`): submit a dedup or
reconcile run (through the task queue), read the run records, expire old observations. A requested run's job is
DedupSweep.run_requested (sweep.py)."""


from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import structlog

from service.core.domain import now_iso
from service.core.settings import DedupSettings, HooksSettings
from service.maintenance.records import MaintenanceRecords, summary
from service.schemas.maintenance import DedupAccepted, DedupRequest, DedupRunReport, ReconcileAccepted, ReconcileRequest
from service.stores.vector import MemoryFilter, VectorStore
from service.tasks.jobs import DedupJob, DeleteJob, ReconcileJob
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)
__all__ = ["MaintenanceRuns", "summary"]


class MaintenanceRuns:
    """What the API, the console and the worker's crons start or read of maintenance runs."""

    def __init__(self, dedup: DedupSettings, threshold: float, hooks: HooksSettings, tasks: TaskQueue,
                 records: MaintenanceRecords, vectors: VectorStore) -> None:
        """`threshold`: the sweep's (DEDUP_SIMILARITY_THRESHOLD, else the embedding model's calibrated value)."""
        self.dedup = dedup
        self.threshold = threshold
        self.hooks = hooks
        self.tasks = tasks
        self.records = records  # the run records (MaintenanceRecords)
        self.vectors = vectors

    async def submit_dedup(self, req: DedupRequest) -> DedupAccepted:
        """POST /v1/maintenance/dedup: enqueue a run through the task queue (task id = run id).

        Every request is a new run (the identity carries the request time): repeating "run now" must run
        again, and the lock keeps overlapping runs from both working."""
        identity = {"user_id": req.user_id, "dry_run": req.dry_run, "requested_ns": time.time_ns()}
        task_id = await self.tasks.enqueue(DedupJob(user_id=req.user_id, dry_run=req.dry_run), identity)
        queued = DedupRunReport(
            run_id=task_id, trigger="api", status="queued", dry_run=req.dry_run, user_id=req.user_id, task_id=task_id,
            threshold=self.threshold, batch_size=self.dedup.batch_size,
            queued_at=now_iso(),
        )
        await self.records.save(queued, only_new=True)  # the worker may have started it
        log.info("dedup_run_queued", run_id=task_id, user_id=req.user_id, dry_run=req.dry_run)
        return DedupAccepted(
            task_id=task_id, poll_url=f"/v1/tasks/{task_id}", run_id=task_id,
            run_url=f"/v1/maintenance/runs/{task_id}",
        )


    async def submit_reconcile(self, req: ReconcileRequest) -> ReconcileAccepted:
        """POST /v1/maintenance/reconcile: a full reconcile through the task queue (task id = run id)."""
        identity = {"user_id": req.user_id, "dry_run": req.dry_run, "requested_ns": time.time_ns()}
        task_id = await self.tasks.enqueue(ReconcileJob(user_id=req.user_id, dry_run=req.dry_run), identity)
        queued = DedupRunReport(run_id=task_id, kind="reconcile", trigger="api", status="queued", dry_run=req.dry_run,
                                user_id=req.user_id, task_id=task_id, queued_at=now_iso())
        await self.records.save(queued, only_new=True)
        return ReconcileAccepted(task_id=task_id, poll_url=f"/v1/tasks/{task_id}", run_id=task_id,
                                 run_url=f"/v1/maintenance/runs/{task_id}")


    async def expire_observations(self, limit_per_user: int = 100_000) -> int:
        """Observations (task_context memories a hook captured: metadata with session_id and tool) older than
        OBSERVATION_TTL_DAYS go through the normal delete path (so deleting erases). Returns how many were
        queued for deletion."""
        days = self.hooks.observation_ttl_days
        if days <= 0:
            return 0
        cutoff = (datetime.now(UTC) - timedelta(days=days)).isoformat()
        queued = 0
        for user in sorted({b.user_id for b in await self.vectors.boundaries(None)}):
            flt = MemoryFilter(user_id=user, all_scopes=True, categories=("task_context",))
            old: list[str] = []
            cursor: str | None = None
            for _ in range(limit_per_user // 500 + 1):
                page, cursor = await self.vectors.scroll(flt, 500, cursor)
                old += [m.id for m in page if "session_id" in m.metadata and "tool" in m.metadata
                        and m.created_at < cutoff]
                if cursor is None:
                    break
            for start in range(0, len(old), 1000):
                ids = old[start : start + 1000]
                await self.tasks.enqueue(DeleteJob(user_id=user, memory_ids=ids), {"expire": ids})
                queued += len(ids)
        if queued:
            log.info("observations_expired", queued=queued, ttl_days=days)
        return queued
