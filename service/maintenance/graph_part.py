"""The graph half of a dedup run's removals. The vectors of duplicates go first (sweep.py), recorded as pending
graph removals; then their (:Memory) nodes are marked removed and the edges only they supported expire, through
the ledger. What the graph could not take stays pending and is retried by the next run (`retry_pending`), following
survivors that were themselves removed later to the one that stays. Also the state of one run (`SweepState`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from service.ledger.ledger import Ledger
from service.maintenance.records import STORE_BATCH, DedupLock, PendingGraph, extend_capped
from service.schemas.maintenance import DedupPhaseReport, DedupRunReport, DedupUserReport
from service.stores.vector import VectorStore

log = structlog.get_logger(__name__)

MAX_PENDING_PER_RUN = 50_000  # pending graph removals one run retries
MAX_CHAIN = 100  # hops followed when pending removals point at each other


def chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


@dataclass
class SweepState:
    report: DedupRunReport
    dry_run: bool
    cutoff: int  # stamp of the run's start: later writes are not part of it
    deadline: float  # time.monotonic() after which the run stops between steps
    lock: DedupLock
    users: dict[str, DedupUserReport] = field(default_factory=dict)
    graph_down: str | None = None  # the first graph error of this run: later graph calls are skipped
    last_save: float = 0.0
    stopped: str | None = None  # why the run stopped early

    def should_stop(self) -> bool:
        if self.stopped:
            return True
        if self.lock.lost:
            self.stopped = "the run lock was lost (another run may have started); stopped"
        elif time.monotonic() > self.deadline:
            self.stopped = "time budget exhausted; the next run continues"
        return self.stopped is not None

    def user(self, user_id: str) -> DedupUserReport:
        if user_id not in self.users:
            self.users[user_id] = DedupUserReport(user_id=user_id)
        return self.users[user_id]


class GraphRemovals:
    def __init__(self, vectors: VectorStore, ledger: Ledger, pending: PendingGraph) -> None:
        self.vectors = vectors
        self.ledger = ledger
        self.pending = pending

    async def remove(
        self, state: SweepState, phase: DedupPhaseReport, ids: list[str], duplicate_of: dict[str, str], now: str
    ) -> None:
        if state.graph_down:
            phase.errors.append(f"graph part of {len(ids)} removals left pending: graph unavailable "
                                f"earlier in this run ({state.graph_down})")
            return
        for batch in chunks(ids, STORE_BATCH):
            if state.should_stop():
                phase.errors.append(f"graph part of {len(batch)} removals left pending: {state.stopped}")
                continue
            try:
                expired = await self._expire(batch, {r: duplicate_of[r] for r in batch}, now)
            except Exception as exc:  # a graph error never blocks the vector phase: reported, retried next run
                state.graph_down = f"{type(exc).__name__}: {exc}"[:300]
                phase.errors.append(f"graph part of {len(ids)} removals left pending: {state.graph_down}")
                log.warning("dedup_graph_failed", error=state.graph_down, pending=len(ids))
                return
            await self.pending.done(batch)
            phase.graph_edges_expired += len(expired)
            extend_capped(phase.graph_expired_edge_ids, expired, phase)

    async def _expire(self, ids: list[str], duplicate_of: dict[str, str], now: str) -> list[str]:
        """In one idempotent call: removed (:Memory) nodes get deleted_at and duplicate_of -> survivor; RELATES
        edges only removed memories supported expire; edges the survivor (or any live memory) also supports
        keep living without the removed ids."""
        return await self.ledger.expire_duplicates(ids, now, duplicate_of)

    async def retry_pending(self, state: SweepState) -> None:
        retry = state.report.graph_retry
        entries = await self.pending.read(MAX_PENDING_PER_RUN)
        if not entries:
            return
        # Removed memories must really be gone from the vectors (a failed delete is not a removal).
        ids = sorted(entries)
        still_there: set[str] = set()
        for batch in chunks(ids, STORE_BATCH):
            still_there |= {m.id for m in await self.vectors.get(batch)}
        if still_there:
            await self.pending.done(sorted(still_there))
        live = {i: e for i, e in entries.items() if i not in still_there}
        # Follow survivors that were themselves removed later, to the one that stays.
        final: dict[str, str] = {}
        for rid, entry in live.items():
            target = entry["dup"]
            for _ in range(MAX_CHAIN):
                if target not in live:
                    break
                target = live[target]["dup"]
            final[rid] = target
        exists: set[str] = set()
        for batch in chunks(sorted(set(final.values())), STORE_BATCH):
            exists |= {m.id for m in await self.vectors.get(batch)}
        by_time: dict[str, list[str]] = {}
        for rid, entry in live.items():
            by_time.setdefault(entry["at"], []).append(rid)
        for at, rids in sorted(by_time.items()):
            for batch in chunks(sorted(rids), STORE_BATCH):
                if state.should_stop():
                    retry.errors.append(f"{len(batch)} pending graph removals not retried: {state.stopped}")
                    continue
                dups = {r: final[r] for r in batch if final[r] in exists}
                try:
                    if dups:
                        expired = await self._expire(batch, dups, at)
                    else:
                        expired = await self.ledger.expire_duplicates(batch, at)
                except Exception as exc:  # still down: stays pending for the next run
                    state.graph_down = f"{type(exc).__name__}: {exc}"[:300]
                    retry.errors.append(f"pending graph removals still failing: {state.graph_down}")
                    log.warning("dedup_graph_retry_failed", error=state.graph_down, pending=len(live))
                    return
                await self.pending.done(batch)
                retry.retried += len(batch)
                retry.graph_edges_expired += len(expired)
        log.info("dedup_graph_retried", retried=retry.retried, expired=retry.graph_edges_expired)
