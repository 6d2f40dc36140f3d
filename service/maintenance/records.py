"""Dedup state in Redis: the run lock, the run reports (dedup and reconcile runs, listed together) and the
pending graph removals a later run retries."""


from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from arq.connections import ArqRedis
from redis.exceptions import RedisError

from service.core.errors import NotFound
from service.core.keys import Keys
from service.core.kv import aw, redis_guard
from service.core.settings import RedisQueueSettings
from service.maintenance.algorithm import stamp_of
from service.schemas.maintenance import DedupGroup, DedupPhaseReport, DedupRunReport, DedupRunSummary

log = structlog.get_logger(__name__)

STORE_BATCH = 500  # ids per vector delete / get, per graph call and per Redis call
REPORT_MAX_IDS = 10_000  # ids kept per user and phase in a stored report (counts stay exact)
RUNS_KEPT = 500  # run records listed by GET /v1/maintenance/runs
LOCK_TTL_S = 60  # the run lock expires this long after its holder stopped refreshing it
LOCK_REFRESH_S = 15
_T = TypeVar("_T")


# =================================================================================================
# Redis: lock, run records, pending graph removals
# =================================================================================================

_REFRESH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class DedupKeys:
    """The dedup runs' Redis keys (service/core/keys.py), prefixed with ARQ_QUEUE_NAME like the queue's own."""

    prefix: str

    @property
    def lock(self) -> str:
        return Keys(self.prefix).dedup_lock

    @property
    def runs(self) -> str:
        return Keys(self.prefix).dedup_runs

    def run(self, run_id: str) -> str:
        return Keys(self.prefix).dedup_run(run_id)

    @property
    def pending(self) -> str:
        return Keys(self.prefix).dedup_graph_pending


class DedupLock:
    """One dedup run at a time across every worker: SET NX with a TTL, refreshed while the run lives.

    A holder that dies stops refreshing and the lock expires LOCK_TTL_S later. A run that finds its
    own id in the lock (an ARQ retry of a run whose process died) takes it over."""

    def __init__(self, redis: ArqRedis, key: str, token: str, ttl_s: float = LOCK_TTL_S) -> None:
        self._redis = redis
        self._key = key
        self.token = token
        self._ttl_ms = int(ttl_s * 1000)
        self._refresh = redis.register_script(_REFRESH)
        self._release = redis.register_script(_RELEASE)
        self.lost = False

    async def acquire(self) -> bool:
        if await self._redis.set(self._key, self.token, nx=True, px=self._ttl_ms):
            return True
        if await self.holder() == self.token:
            return bool(await self._refresh(keys=[self._key], args=[self.token, self._ttl_ms]))
        return False

    async def holder(self) -> str | None:
        raw = await self._redis.get(self._key)
        return raw.decode() if isinstance(raw, bytes) else raw

    async def keep_alive(self, max_beats: int) -> None:
        for _ in range(max_beats):
            await asyncio.sleep(LOCK_REFRESH_S)
            try:
                ok = await self._refresh(keys=[self._key], args=[self.token, self._ttl_ms])
            except (RedisError, OSError) as exc:
                log.warning("dedup_lock_refresh_failed", error=str(exc))
                continue
            if not ok:
                self.lost = True
                log.error("dedup_lock_lost", run_id=self.token)
                return

    async def release(self) -> None:
        await self._release(keys=[self._key], args=[self.token])


class MaintenanceRecords:
    """Run reports: `<queue>:dedup:run:<id>` (JSON, TASK_TTL_SECONDS) and `<queue>:dedup:runs` (a sorted
    set of run ids by start time, the newest RUNS_KEPT)."""

    def __init__(self, redis: ArqRedis, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._settings = settings
        self._keys = DedupKeys(settings.queue_name)
        self._ttl = settings.task_ttl_seconds

    async def _guard(self, what: str, coro: Awaitable[_T]) -> _T:
        return await redis_guard(self._settings, f"maintenance run records: {what}", coro, scale=4)

    async def save(self, report: DedupRunReport, *, only_new: bool = False) -> bool:
        return bool(await self._guard("save", self._save(report, only_new)))

    async def _save(self, report: DedupRunReport, only_new: bool) -> bool:
        body = report.model_dump_json()
        if not await self._redis.set(self._keys.run(report.run_id), body, ex=self._ttl, nx=only_new):
            return False
        when = stamp_of(report.queued_at or report.started_at) or 0
        pipe = self._redis.pipeline(transaction=False)
        pipe.zadd(self._keys.runs, {report.run_id: when / 1e6})
        pipe.zremrangebyrank(self._keys.runs, 0, -(RUNS_KEPT + 1))
        await pipe.execute()
        return True

    async def get(self, run_id: str) -> DedupRunReport:
        raw = await self._guard("get", self._redis.get(self._keys.run(run_id)))
        if raw is None:
            raise NotFound(f"unknown maintenance run '{run_id}' (run records expire after TASK_TTL_SECONDS)")
        return DedupRunReport.model_validate_json(raw)

    async def recent(self, limit: int, only_user: str | None = None) -> list[DedupRunSummary]:
        """The newest runs; with `only_user`, only the runs of that one user (among the newest RUNS_KEPT)."""
        runs: list[DedupRunSummary] = await self._guard("list", self._list(RUNS_KEPT if only_user else limit))
        if only_user is not None:
            runs = [r for r in runs if r.user_id == only_user]
        return runs[:limit]

    async def _list(self, limit: int) -> list[DedupRunSummary]:
        ids = [i.decode() if isinstance(i, bytes) else str(i)
               for i in await self._redis.zrevrange(self._keys.runs, 0, max(0, limit - 1))]
        if not ids:
            return []
        raws = await self._redis.mget([self._keys.run(i) for i in ids])
        out: list[DedupRunSummary] = []
        gone: list[str] = []
        for run_id, raw in zip(ids, raws, strict=True):
            if raw is None:
                gone.append(run_id)
                continue
            report = DedupRunReport.model_validate_json(raw)
            out.append(DedupRunSummary.model_validate(report.model_dump(include=set(DedupRunSummary.model_fields))))
        if gone:
            await self._redis.zrem(self._keys.runs, *gone)
        return out


class PendingGraph:
    """Graph removals applied to the vectors but not (yet) to the graph: a Redis hash
    removed id -> {"dup": survivor id, "user": user id, "at": removal time, "run": run id}."""

    def __init__(self, redis: ArqRedis, key: str, settings: RedisQueueSettings) -> None:
        self._redis = redis
        self._key = key
        self._settings = settings

    async def _guard(self, what: str, value: Awaitable[_T] | _T) -> _T:
        return await redis_guard(self._settings, f"dedup pending graph set: {what}", aw(value), scale=4)

    async def add(self, entries: dict[str, dict[str, str]]) -> None:
        items = list(entries.items())
        for start in range(0, len(items), STORE_BATCH):
            chunk = items[start : start + STORE_BATCH]
            await self._guard("add", self._redis.hset(self._key, mapping={k: json.dumps(v) for k, v in chunk}))

    async def done(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), STORE_BATCH):
            chunk = list(ids[start : start + STORE_BATCH])
            if chunk:
                await self._guard("done", self._redis.hdel(self._key, *chunk))

    async def count(self) -> int:
        return int(await self._guard("count", self._redis.hlen(self._key)))

    async def read(self, limit: int) -> dict[str, dict[str, str]]:
        return await self._guard("read", self._read(limit))

    async def _read(self, limit: int) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        cursor: int | bytes | str = 0
        for _ in range(limit // 100 + 2):
            cursor, chunk = await self._redis.hscan(self._key, cursor=int(cursor), count=500)
            for k, v in chunk.items():
                key = k.decode() if isinstance(k, bytes) else str(k)
                out[key] = json.loads(v)
            if int(cursor) == 0 or len(out) >= limit:
                break
        return dict(list(out.items())[:limit])




def record_phase(
    phase: DedupPhaseReport,
    groups: list[tuple[str, list[str]]],
    removable: dict[str, str],
    deleted: set[str],
    scanned: int,
) -> None:
    phase.scanned += scanned
    for keep, removed in groups:
        phase.skipped_changed += sum(1 for r in removed if r not in removable)
        kept = [r for r in removed if r in deleted]
        if not kept:
            continue
        phase.groups += 1
        phase.removed += len(kept)
        if len(phase.removed_ids) + len(kept) <= REPORT_MAX_IDS:
            phase.removed_ids += kept
            phase.group_details.append(DedupGroup(keep=keep, remove=kept))
        else:
            phase.truncated = True


def extend_capped(target: list[str], items: list[str], phase: DedupPhaseReport) -> None:
    room = REPORT_MAX_IDS - len(target)
    target += items[: max(0, room)]
    if len(items) > room:
        phase.truncated = True


def summary(report: DedupRunReport) -> dict[str, Any]:
    """What a maintenance task's result shows: the run's outcome and where its full report is."""
    return {**report.model_dump(include={"run_id", "status", "dry_run", "detail", "totals"}),
            "run_url": f"/v1/maintenance/runs/{report.run_id}"}
