"""Dedup maintenance: the exact + near-duplicate sweep, its Redis lock and run records, and the entry
points the API and the worker call (the ARQ cron wiring is in worker/crons.py). The algorithm and its
cost are described in docs/dedup.md.

Per boundary (one user's global scope, or one project of that user; never wider):

1. read: the memories and their vectors, in pages of DEDUP_BATCH_SIZE. Memories written (created or
   updated) after the run started are left out of it entirely.
2. exact: same `hash` = one group, settled while the pages stream in (the newest keeps the one matrix
   row of its hash), so the matrix holds one row per distinct content.
3. near: cosine similarity >= DEDUP_SIMILARITY_THRESHOLD, transitively (union-find), computed with
   numpy in tiles of BLOCK_ROWS x BLOCK_COLS of the upper triangle, one row block per worker thread
   call (`asyncio.to_thread`), so the event loop runs between blocks and while BLAS works.
4. verify: every memory about to be removed, and its survivor, is re-read; one that changed or vanished
   since it was read is not removed (the next run looks at it again).
5. remove: the vectors (batches of 500), then the graph part. The graph part is written to a pending
   set in Redis *before* the vectors go, and taken out when the graph has applied it, so an outage
   or a crash leaves it for the next run, which retries it first.

"Newest" is the greatest (created_at, id): created_at first, the larger id on a tie."""


from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any, Literal

import structlog
from arq.connections import ArqRedis
from redis.exceptions import RedisError

from service.core.domain import Progress, now_iso
from service.core.errors import DependencyUnavailable
from service.core.metrics import DEDUP_REMOVED
from service.core.settings import DedupSettings, RedisQueueSettings
from service.ledger.ledger import Ledger
from service.ledger.outbox import MemoryLocks, Outbox
from service.maintenance.algorithm import (
    BLOCK_COLS,
    BLOCK_ROWS,
    BoundaryCollector,
    BoundaryPlan,
    NearDuplicateFinder,
    ingest_page,
    plan_ids,
    stamp_of,
    unchanged_since,
)
from service.maintenance.graph_part import GraphRemovals, SweepState, chunks
from service.maintenance.records import (
    LOCK_REFRESH_S,
    STORE_BATCH,
    DedupKeys,
    DedupLock,
    MaintenanceRecords,
    PendingGraph,
    record_phase,
    summary,
)
from service.schemas.maintenance import DedupRunReport, DedupTotals, DedupUserReport
from service.stores.graph import MemoryGraphWrites
from service.stores.vector import Boundary, VectorStore
from service.tasks.jobs import DedupJob

log = structlog.get_logger(__name__)

MAX_BOUNDARY_LIST = 100_000  # users (and projects per user) one run lists
SAVE_EVERY_S = 2.0  # a running report is saved at most this often (progress for GET /runs/{id})
Trigger = Literal["api", "cron", "manual"]


def run_budget(settings: RedisQueueSettings) -> float:
    """Seconds one run may take: the ARQ job timeout minus our usual 10 % (max 10 s) job margin, and
    20 % of that kept for the last graph calls and the report. A run that reaches it stops between
    steps and reports `partial`; what it removed stays removed."""
    t = float(settings.job_timeout)
    return max(1.0, t - min(10.0, t * 0.1)) * 0.8


class DedupSweep:
    """Runs one dedup sweep over the vector store (and the graph behind it) under the Redis run lock."""

    def __init__(
        self,
        settings: RedisQueueSettings,
        dedup: DedupSettings,
        threshold: float,
        vectors: VectorStore,
        graph: Ledger | MemoryGraphWrites,
        redis: ArqRedis,
        *,
        block_rows: int = BLOCK_ROWS,
        block_cols: int = BLOCK_COLS,
    ) -> None:
        self.settings = settings
        self.vectors = vectors
        # its removals in both stores (a graph store alone: a ledger of its own over it)
        self.ledger = graph if isinstance(graph, Ledger) else Ledger(Outbox(redis, settings), vectors, graph)
        self.redis = redis
        self.keys = DedupKeys(settings.queue_name)
        self.runs = MaintenanceRecords(redis, settings)
        self.pending = PendingGraph(redis, self.keys.pending, settings)
        self.graph_part = GraphRemovals(vectors, self.ledger, self.pending)
        self.locks = MemoryLocks(redis, settings)
        self.block_rows = block_rows
        self.block_cols = block_cols
        self.threshold = threshold  # DEDUP_SIMILARITY_THRESHOLD, else the embedding model's calibrated value
        self.batch_size = dedup.batch_size

    async def run_requested(self, task_id: str, job: DedupJob) -> dict[str, Any]:
        """The job of a POST /v1/maintenance/dedup (its task id is the run id): one run, summarised."""
        report = await self.run(task_id, trigger="api", user_id=job.user_id, dry_run=job.dry_run, task_id=task_id,
                                queued_at=job.accepted_at)
        return summary(report)

    # ---------------------------------------------------------------------------------------------

    async def run(
        self,
        run_id: str,
        *,
        trigger: Trigger,
        user_id: str | None = None,
        dry_run: bool = False,
        budget_s: float | None = None,
        task_id: str | None = None,
        queued_at: str | None = None,
    ) -> DedupRunReport:
        """One run. Returns its report (also stored); a run that finds another one going is `skipped`."""
        started = now_iso()
        report = DedupRunReport(
            run_id=run_id, trigger=trigger, status="running", dry_run=dry_run, user_id=user_id, task_id=task_id,
            threshold=self.threshold, batch_size=self.batch_size, queued_at=queued_at, started_at=started,
        )
        budget = run_budget(self.settings) if budget_s is None else budget_s
        lock = DedupLock(self.redis, self.keys.lock, run_id)
        try:
            acquired = await lock.acquire()
            holder = None if acquired else await lock.holder()
        except (RedisError, OSError) as exc:
            where = self.settings.safe_url
            raise DependencyUnavailable(f"dedup lock unavailable: redis at {where}: {exc}") from exc
        if not acquired:
            report.status = "skipped"
            report.detail = f"another dedup run is in progress (run {holder}); this one did nothing"
            report.finished_at = now_iso()
            report.duration_s = 0.0
            log.warning("dedup_run_skipped", run_id=run_id, trigger=trigger, running=holder)
            await self.runs.save(report)
            return report

        state = SweepState(report, dry_run, stamp_of(started) or 0, time.monotonic() + budget, lock)
        beats = int(budget / LOCK_REFRESH_S) + 10
        heartbeat = asyncio.create_task(lock.keep_alive(beats), name=f"dedup-lock-{run_id}")
        t0 = time.perf_counter()
        log.info("dedup_run_started", run_id=run_id, trigger=trigger, user_id=user_id, dry_run=dry_run,
                 threshold=self.threshold, budget_s=round(budget, 1))
        try:
            await self.runs.save(report)
            await self._sweep(state, user_id)
            report.status = "partial" if state.stopped else "completed"
            report.detail = state.stopped
        except asyncio.CancelledError:
            report.status = "interrupted"
            report.detail = "the worker stopped during the run; the next run continues"
            raise
        except Exception as exc:
            report.status = "failed"
            report.detail = f"{type(exc).__name__}: {exc}"[:500]
            log.exception("dedup_run_failed", run_id=run_id)
            raise
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            report.finished_at = now_iso()
            report.duration_s = round(time.perf_counter() - t0, 3)
            self._fill(state)
            try:
                await self.runs.save(report)
                await lock.release()
            except (DependencyUnavailable, RedisError, OSError) as exc:  # the lock expires by itself
                log.warning("dedup_run_record_failed", run_id=run_id, error=str(exc))
            t = report.totals
            log.info("dedup_run_finished", run_id=run_id, status=report.status, dry_run=dry_run,
                     duration_s=report.duration_s, scanned=t.scanned, exact_removed=t.exact_removed,
                     near_removed=t.near_removed, graph_edges_expired=t.graph_edges_expired, errors=t.errors)
        return report

    # ---------------------------------------------------------------------------------------------

    async def _sweep(self, state: SweepState, user_id: str | None) -> None:
        report = state.report
        report.graph_retry.pending_before = await self.pending.count()
        if not state.dry_run and report.graph_retry.pending_before:
            await self.graph_part.retry_pending(state)
        boundaries = await self.vectors.boundaries(user_id, MAX_BOUNDARY_LIST)
        # Smallest first: a run that reaches its budget has finished every boundary it could.
        boundaries.sort(key=lambda b: (b.count, b.user_id, b.scope.value, b.project_id or ""))
        for done, b in enumerate(boundaries):
            report.progress = Progress(done=done, total=len(boundaries))
            if state.should_stop():
                break
            user = state.user(b.user_id)
            user.boundaries += 1
            try:
                await self._boundary(state, b, user)
            except DependencyUnavailable as exc:
                msg = f"{_where(b)}: {exc}"
                user.errors.append(msg)
                log.warning("dedup_boundary_failed", user_id=b.user_id, scope=b.scope.value,
                            project_id=b.project_id, error=str(exc))
            await self._maybe_save(state)
        report.progress = Progress(done=len(boundaries), total=len(boundaries))
        if not state.dry_run:
            report.graph_retry.pending_after = await self.pending.count()
        else:
            report.graph_retry.pending_after = report.graph_retry.pending_before

    async def _maybe_save(self, state: SweepState) -> None:
        now = time.monotonic()
        if now - state.last_save >= SAVE_EVERY_S:
            state.last_save = now
            self._fill(state)
            await self.runs.save(state.report)

    def _fill(self, state: SweepState) -> None:
        report = state.report
        report.users = [state.users[u] for u in sorted(state.users)]
        t = DedupTotals()
        for u in report.users:
            t.scanned += u.exact.scanned
            t.exact_groups += u.exact.groups
            t.exact_removed += u.exact.removed
            t.near_groups += u.near.groups
            t.near_removed += u.near.removed
            t.graph_edges_expired += u.exact.graph_edges_expired + u.near.graph_edges_expired
            t.errors += len(u.errors) + len(u.exact.errors) + len(u.near.errors)
        t.graph_edges_expired += report.graph_retry.graph_edges_expired
        t.errors += len(report.graph_retry.errors) + len(report.errors)
        report.totals = t

    # ---------------------------------------------------------------------------------------------

    async def _read(self, state: SweepState, b: Boundary, user: DedupUserReport) -> BoundaryCollector | None:
        collector = BoundaryCollector(b.count)
        cursor: str | None = None
        flt = b.filter()
        unreadable = 0
        max_pages = b.count // self.batch_size + 1_000  # writes may add pages while we read
        for _ in range(max_pages):
            if state.should_stop():
                return None
            page, cursor = await self.vectors.scroll_vectors(flt, self.batch_size, cursor)
            if page:  # parsing and copying a page is CPU work: off the event loop too
                late, bad = await asyncio.to_thread(ingest_page, collector, page, state.cutoff)
                user.skipped_recent += late
                unreadable += bad
            if cursor is None:
                break
        else:
            user.errors.append(f"{_where(b)}: more than {max_pages} pages; read stopped there")
        if unreadable:
            user.errors.append(f"{_where(b)}: {unreadable} memories with unreadable timestamps left alone")
        return collector

    async def _near(self, state: SweepState, collector: BoundaryCollector) -> list[tuple[int, list[int]]] | None:
        if collector.rows < 2:
            return []
        finder = await asyncio.to_thread(
            NearDuplicateFinder, collector.matrix, self.threshold, self.block_rows, self.block_cols, collector.numbers
        )
        for _ in range(finder.steps_left):
            if state.should_stop():
                return None
            await asyncio.to_thread(finder.step)  # BLAS releases the GIL; the loop runs between blocks too
        return await asyncio.to_thread(lambda: finder.groups(collector.rank()))

    async def _boundary(self, state: SweepState, b: Boundary, user: DedupUserReport) -> None:
        collector = await self._read(state, b, user)
        if collector is None:
            return  # stopped while reading: nothing of this boundary is touched
        near_rows = await self._near(state, collector)
        if near_rows is None:
            user.near.errors.append(f"{_where(b)}: near phase not finished ({state.stopped})")
        plan, survivor, read_hash = await asyncio.to_thread(plan_ids, collector, near_rows or [])
        involved = set(survivor) | set(survivor.values())
        del collector  # the matrix is not needed any more
        # Locked from the check to the removal: an update or a delete of one of them waits (or, when it
        # holds the lock first, the memory is left for the next run), so nothing is lost or resurrected.
        token = uuid.uuid4().hex
        locked = await self.locks.try_acquire(sorted(involved), token) if not state.dry_run else involved
        try:
            await self._remove_boundary(state, b, user, plan, survivor, read_hash, locked)
        finally:
            if not state.dry_run and locked:
                await self.locks.release(sorted(locked), token)

    async def _remove_boundary(
        self, state: SweepState, b: Boundary, user: DedupUserReport, plan: BoundaryPlan, survivor: dict[str, str],
        read_hash: dict[str, str], locked: set[str],
    ) -> None:
        valid = await self._unchanged(state, b, locked, read_hash)
        removable = {r: s for r, s in survivor.items() if r in valid and s in valid}
        exact_ids = [r for _, rem in plan.exact for r in rem if r in removable]
        near_ids = [r for _, rem in plan.near for r in rem if r in removable]
        log.debug("dedup_boundary_planned", user_id=b.user_id, scope=b.scope.value, project_id=b.project_id,
                  scanned=plan.scanned, exact_groups=len(plan.exact), near_groups=len(plan.near),
                  removable=len(removable), locked_elsewhere=len(set(survivor) - locked))

        deleted: set[str] = set()
        failure: DependencyUnavailable | None = None
        now = now_iso()
        if state.dry_run:
            deleted = set(removable)  # what a real run would remove
        elif removable:
            await self.pending.add(
                {r: {"dup": removable[r], "user": b.user_id, "at": now, "run": state.report.run_id} for r in removable}
            )
            try:
                for batch in chunks(exact_ids + near_ids, STORE_BATCH):
                    await self.ledger.drop_vectors(batch)
                    deleted.update(batch)
            except DependencyUnavailable as exc:
                failure = exc
            not_deleted = [r for r in removable if r not in deleted]
            if not_deleted:  # the graph must not lose memories whose vectors are still there
                await self.pending.done(not_deleted)
        record_phase(user.exact, plan.exact, removable, deleted, plan.scanned)
        record_phase(user.near, plan.near, removable, deleted, plan.near_scanned)
        if not state.dry_run:
            DEDUP_REMOVED.labels("exact").inc(sum(1 for r in exact_ids if r in deleted))
            DEDUP_REMOVED.labels("near").inc(sum(1 for r in near_ids if r in deleted))
        if failure is not None:
            raise failure
        if state.dry_run or not deleted:
            return
        log.info("dedup_boundary_removed", user_id=b.user_id, scope=b.scope.value, project_id=b.project_id,
                 exact=len(exact_ids), near=len(near_ids))
        for phase, removed in ((user.exact, exact_ids), (user.near, near_ids)):
            if removed:
                await self.graph_part.remove(state, phase, removed, {r: removable[r] for r in removed}, now)

    async def _unchanged(
        self, state: SweepState, b: Boundary, ids: set[str], read_hash: dict[str, str]
    ) -> set[str]:
        """The ids that still exist in this boundary as they were read (same hash, not updated since)."""
        ok: set[str] = set()
        for batch in chunks(sorted(ids), STORE_BATCH):
            for m in await self.vectors.get(batch):
                if unchanged_since(m, b, read_hash.get(m.id), state.cutoff):
                    ok.add(m.id)
        return ok


def _where(b: Boundary) -> str:
    return "global" if b.project_id is None else f"project {b.project_id}"

