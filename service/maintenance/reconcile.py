"""The reconciler: finishes what the write path left half-done, so both stores end up agreeing.

Two passes (docs/write-path.md):

- `drain`: outbox intents older than RECONCILE_GRACE_SECONDS whose job has ended (a write whose graph
  half was pending, an update or a delete whose graph step failed, a job that died). Runs on the
  worker's reconcile cron (every RECONCILE_INTERVAL_SECONDS) and at worker start. The graph half of a
  write is landed only for memories the vector store still holds (a memory deleted meanwhile stays
  deleted); a delete is finished in both stores. Its task's `result.graph` then says "stored".
- `full`: per user, the vector store's ids against the graph's (:Memory) nodes, in pages, repairing
  drift in both directions: a vector without a node gets its node (links found again by the rules);
  a live node without a vector gets its vector re-embedded from the node, unless a delete of it was
  recorded (then the delete is finished); a vector of a memory the graph knows as deleted is removed.
  Memories named by an outbox intent, or stored within the grace period, are left to the drain.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from service.ai.embeddings import Embedder
from service.core.domain import Memory, Progress, Scope, now_iso
from service.core.errors import DependencyUnavailable
from service.core.kv import RedisKV
from service.core.metrics import RECONCILE_REPAIRS
from service.core.settings import RedisQueueSettings, WritePathSettings
from service.ledger.ledger import Ledger
from service.ledger.outbox import Intent, MemoryLocks, Outbox
from service.maintenance.records import MaintenanceRecords
from service.schemas.maintenance import DedupRunReport
from service.stores.graph import GraphStore, MemoryLinks
from service.stores.vector import MemoryFilter, VectorStore
from service.tasks.jobs import ReconcileJob
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)

DRAIN_CHUNK = 64  # intents finished side by side
MAX_DRAIN_ROUNDS = 10_000
MAX_ATTEMPTS = 10  # a drain attempt that fails for a reason other than an outage counts; then it is dropped
PAGE = 500
MAX_PAGES = 2_000  # per user and store: 1M memories
REPORT_IDS = 1_000

REPAIR_KINDS = ("graph_node_missing", "vector_missing", "vector_of_deleted_memory", "delete_finished")


class RepairPath(Protocol):
    """What the reconciler repairs through (service/writepath/writes.py `MemoryWriter` is one): the write path's
    parts, and the rules that find a memory's links again."""

    redis: RedisQueueSettings
    tasks: TaskQueue
    kv: RedisKV
    vectors: VectorStore
    graph: GraphStore
    ledger: Ledger
    outbox: Outbox
    locks: MemoryLocks
    embedder: Embedder

    def links_of(self, memory: Memory) -> MemoryLinks: ...


class Reconciler:
    def __init__(self, writer: RepairPath, writepath: WritePathSettings) -> None:
        self.writer = writer
        self.runs = MaintenanceRecords(writer.tasks.redis, writer.redis)
        self.writepath = writepath

    async def run_requested(self, task_id: str, job: ReconcileJob) -> dict[str, Any]:
        """The job of a POST /v1/maintenance/reconcile: a full reconcile, its run summarised."""
        report = await self.full(task_id, trigger="api", user_id=job.user_id, dry_run=job.dry_run, task_id=task_id,
                                 queued_at=job.accepted_at)
        return {"run_id": report.run_id, "status": report.status, "dry_run": report.dry_run,
                "repairs": report.repairs, "run_url": f"/v1/maintenance/runs/{report.run_id}"}

    # ---- drain ---------------------------------------------------------------------------------

    async def drain(self, budget_s: float | None = None) -> dict[str, int]:
        """Finish due intents, DRAIN_CHUNK at a time side by side (their graph writes coalesce per
        user), until none is due, the graph is down, or `budget_s` (default: 80 % of the interval) ends."""
        budget = budget_s if budget_s is not None else self.writepath.reconcile_interval_seconds * 0.8
        stop_at = time.monotonic() + max(1.0, budget)
        counts = {"landed": 0, "skipped": 0, "abandoned": 0, "waiting": 0, "down": 0}
        for _ in range(MAX_DRAIN_ROUNDS):
            left = counts["waiting"] + counts["down"]  # entries that stay in the outbox: read past them
            intents = await self.writer.outbox.due(self.writepath.reconcile_grace_seconds, DRAIN_CHUNK,
                                                    offset=left)
            if not intents:
                break
            for outcome in await asyncio.gather(*(self._drain_one(i) for i in intents)):
                counts[outcome] += 1
            if counts["down"] or time.monotonic() > stop_at:
                break
        if counts["landed"] or counts["abandoned"]:
            log.info("outbox_drained", **counts)
        return counts

    async def _drain_one(self, intent: Intent) -> str:
        if await self.writer.tasks.leases.is_pending(intent.task_id):
            return "waiting"  # its job is still queued or running: the job finishes it
        try:
            landed = await self._apply(intent)
        except DependencyUnavailable as exc:  # still down: left for the next tick
            log.warning("outbox_intent_waits", task_id=intent.task_id, error=str(exc)[:300])
            return "down"
        except Exception as exc:
            intent.attempts += 1
            if intent.attempts < MAX_ATTEMPTS:
                log.warning("outbox_intent_failed", task_id=intent.task_id, attempts=intent.attempts,
                            error=f"{type(exc).__name__}: {exc}"[:300])
                await self.writer.outbox.save(intent)
                return "waiting"
            log.exception("outbox_intent_abandoned", task_id=intent.task_id, op=intent.op)
            await self.writer.outbox.clear(intent.task_id)
            failed = f"failed: {type(exc).__name__}: {exc}"[:300]
            await self.writer.tasks.records.set_graph_state(intent.task_id, failed)
            return "abandoned"
        await self.writer.outbox.clear(intent.task_id)
        await self.writer.tasks.records.set_graph_state(intent.task_id, "stored")
        await self.writer.kv.add_stats(**{f"reconcile_{intent.op}": 1})
        if landed:
            RECONCILE_REPAIRS.labels(f"outbox_{intent.op}").inc()
        return "landed" if landed else "skipped"

    async def _apply(self, intent: Intent) -> bool:
        """Finish one intent. False when nothing was left to do (the memories are gone)."""
        live = {} if intent.op == "remove" else {
            m.id: m for m in await self.writer.vectors.get(intent.ids()) if m.user_id == intent.user_id}
        return await self.writer.ledger.finish(intent, live)

    # ---- full reconcile --------------------------------------------------------------------------

    async def full(self, run_id: str, *, trigger: str, user_id: str | None = None, dry_run: bool = False,
                   task_id: str | None = None, queued_at: str | None = None) -> DedupRunReport:
        report = DedupRunReport(run_id=run_id, kind="reconcile", trigger=trigger,  # type: ignore[arg-type]
                                status="running", dry_run=dry_run, user_id=user_id, task_id=task_id,
                                queued_at=queued_at, started_at=now_iso(),
                                repairs=dict.fromkeys(REPAIR_KINDS, 0))
        await self.runs.save(report)
        t0 = time.perf_counter()
        try:
            users = [user_id] if user_id else await self._users()
            busy = await self.writer.outbox.all_ids()
            for done, user in enumerate(users):
                report.progress = Progress(done=done, total=len(users))
                await self.runs.save(report)
                try:
                    await self._user(report, user, busy, dry_run)
                except DependencyUnavailable as exc:
                    report.errors.append(f"user {user}: {exc}"[:500])
            report.progress = Progress(done=len(users), total=len(users))
            report.status = "completed" if not report.errors else "partial"
        except Exception as exc:
            report.status = "failed"
            report.detail = f"{type(exc).__name__}: {exc}"[:500]
            raise
        finally:
            report.finished_at = now_iso()
            report.duration_s = round(time.perf_counter() - t0, 3)
            await self.runs.save(report)
            log.info("reconcile_run_finished", run_id=run_id, status=report.status, dry_run=dry_run,
                     **report.repairs)
        return report

    async def _users(self) -> list[str]:
        users = {b.user_id for b in await self.writer.vectors.boundaries(None)}
        users |= set(await self.writer.graph.reads.memory_users())
        return sorted(users)

    async def _user(self, report: DedupRunReport, user: str, busy: set[str], dry_run: bool) -> None:
        recent_cut = datetime.now(UTC).timestamp() - self.writepath.reconcile_grace_seconds
        in_vectors: set[str] = set()
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page, cursor = await self.writer.vectors.scroll(MemoryFilter(user_id=user, all_scopes=True), PAGE, cursor)
            for m in page:
                if _recent(m, recent_cut):
                    busy.add(m.id)
                in_vectors.add(m.id)
            if cursor is None:
                break
        live: set[str] = set()
        deleted: set[str] = set()
        gcursor: str | None = None
        for _ in range(MAX_PAGES):
            gpage = await self.writer.graph.reads.list_episodes(user, None, PAGE, gcursor)
            for item in gpage.items:
                (deleted if item.get("deleted_at") else live).add(str(item["id"]))
            gcursor = gpage.next_cursor
            if gcursor is None:
                break
        node_missing = sorted(in_vectors - live - deleted - busy)
        of_deleted = sorted((in_vectors & deleted) - busy)
        no_vector = sorted(live - in_vectors - busy)
        tombstoned = await self.writer.outbox.tombstoned(user, no_vector)
        finish_delete = [i for i in no_vector if i in tombstoned]
        vector_missing = [i for i in no_vector if i not in tombstoned]
        found = {"graph_node_missing": node_missing, "vector_missing": vector_missing,
                 "vector_of_deleted_memory": of_deleted, "delete_finished": finish_delete}
        for kind, ids in found.items():
            report.repairs[kind] = report.repairs.get(kind, 0) + len(ids)
            if ids and not dry_run:
                RECONCILE_REPAIRS.labels(kind).inc(len(ids))
            if ids:
                report.repaired_ids.setdefault(user, {})[kind] = ids[:REPORT_IDS]
        if any(found.values()):
            log.warning("reconcile_drift", user_id=user, dry_run=dry_run, **{k: len(v) for k, v in found.items()})
        if dry_run:
            return
        now = now_iso()
        ledger = self.writer.ledger
        for start in range(0, len(node_missing), PAGE):
            memories = await self.writer.vectors.get(node_missing[start : start + PAGE])
            await ledger.restore_graph(user, memories, [self.writer.links_of(m) for m in memories])
        await ledger.drop_vectors(of_deleted)
        for start in range(0, len(vector_missing), PAGE):
            nodes = await self.writer.graph.reads.memory_nodes(user, vector_missing[start : start + PAGE])
            memories = [_memory_of_node(n) for n in nodes if not n.get("deleted_at") and n.get("content")]
            async with self.writer.locks.hold([m.id for m in memories]):
                vectors = await self.writer.embedder.embed([m.content for m in memories])
                await ledger.restore_vectors(memories, vectors)
        for start in range(0, len(finish_delete), PAGE):
            await ledger.finish_removal(user, finish_delete[start : start + PAGE], now)
        await self.writer.kv.add_stats(**{f"repair_{k}": len(v) for k, v in found.items()})


def _recent(m: Memory, cut: float) -> bool:
    for stamp in (m.stored_at, m.updated_at, m.created_at):
        if stamp:
            try:
                if datetime.fromisoformat(stamp).timestamp() > cut:
                    return True
            except ValueError:
                continue
    return False


def _memory_of_node(node: dict[str, Any]) -> Memory:
    metadata = node.get("metadata")
    return Memory(
        id=str(node["id"]), user_id=str(node["user_id"]), content=str(node.get("content") or ""),
        category=str(node.get("category") or "domain_knowledge"), scope=Scope(node.get("scope") or "global"),
        project_id=node.get("project_id"), agent_id=node.get("agent_id"), hash=str(node.get("hash") or ""),
        metadata=json.loads(metadata) if isinstance(metadata, str) and metadata else {},
        created_at=str(node.get("created_at") or now_iso()), updated_at=str(node.get("updated_at") or now_iso()),
        task_id=node.get("task_id"), stored_at=now_iso(),
    )
