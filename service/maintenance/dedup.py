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

"Newest" is the greatest (created_at, id): created_at first, the larger id on a tie.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
import uuid
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import structlog
from arq.connections import ArqRedis
from redis.exceptions import RedisError

from service.deps import Deps
from service.domain import (
    DedupAccepted,
    DedupGroup,
    DedupPhaseReport,
    DedupRequest,
    DedupRunReport,
    DedupRunSummary,
    DedupTotals,
    DedupUserReport,
    Memory,
    ReconcileRequest,
)
from service.errors import DependencyUnavailable, NotFound
from service.jobs import DedupJob, ReconcileJob
from service.outbox import MemoryLocks
from service.queue import now_iso
from service.settings import Settings
from service.stores.graph import GraphStore
from service.stores.vector import Boundary, VectorRecord, VectorStore

log = structlog.get_logger(__name__)

# ---- bounds and sizes --------------------------------------------------------------------------

BLOCK_ROWS = 1024  # rows of one similarity tile (one worker-thread call handles one row block)
BLOCK_COLS = 4096  # columns of one tile: a tile is BLOCK_ROWS x BLOCK_COLS float32 = 16 MiB
STORE_BATCH = 500  # ids per vector delete / get and per graph call
REPORT_MAX_IDS = 10_000  # ids kept per user and phase in a stored report (counts stay exact)
RUNS_KEPT = 500  # run records listed by GET /v1/maintenance/runs
MAX_PENDING_PER_RUN = 50_000  # pending graph removals one run retries
MAX_BOUNDARY_LIST = 100_000  # users (and projects per user) one run lists
LOCK_TTL_S = 60  # the run lock expires this long after its holder stopped refreshing it
LOCK_REFRESH_S = 15
SAVE_EVERY_S = 2.0  # a running report is saved at most this often (progress for GET /runs/{id})
MAX_CHAIN = 100  # hops followed when pending removals point at each other

Trigger = Literal["api", "cron", "manual"]
_T = TypeVar("_T")
FloatMatrix = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


def run_budget(settings: Settings) -> float:
    """Seconds one run may take: the ARQ job timeout minus our usual 10 % (max 10 s) job margin, and
    20 % of that kept for the last graph calls and the report. A run that reaches it stops between
    steps and reports `partial`; what it removed stays removed."""
    t = float(settings.arq_job_timeout)
    return max(1.0, t - min(10.0, t * 0.1)) * 0.8


# =================================================================================================
# The algorithm (pure, no I/O): unit-tested in tests/unit/test_dedup_algorithm.py
# =================================================================================================

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stamp_of(value: str | None) -> int | None:
    """Microseconds since the epoch of an ISO-8601 time (naive = UTC); None when missing or unreadable."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(microseconds=1)


def newest_rank(stamps: Sequence[int], ids: Sequence[str]) -> IntArray:
    """rank[i] = position of memory i ordered by (created_at, id): the highest rank is the newest."""
    order = sorted(range(len(ids)), key=lambda i: (stamps[i], ids[i]))
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(ids), dtype=np.int64)
    return rank


class DisjointSets:
    """Union-find over 0..n-1 on a numpy parent array; unions arrive as whole arrays of pairs.

    Parents always point to a smaller index, so there are no cycles. A batch of pairs is merged by
    hooking each larger root onto the smallest root it is paired with (`np.minimum.at`) and repeating
    on the pairs whose roots still differ; a star or a long chain converges in a few rounds because
    roots are found by pointer jumping. Pathological inputs fall back to a scalar loop after 64 rounds.
    """

    def __init__(self, n: int) -> None:
        self.parent: IntArray = np.arange(n, dtype=np.int64)

    def find(self, x: IntArray) -> IntArray:
        p = self.parent
        r = p[x]
        for _ in range(64):
            rr = p[r]
            if np.array_equal(rr, r):
                return r
            r = rr
        self.compress()
        return p[x]

    def union(self, a: IntArray, b: IntArray) -> None:
        for _ in range(64):
            ra, rb = self.find(a), self.find(b)
            diff = ra != rb
            if not diff.any():
                return
            ra, rb = ra[diff], rb[diff]
            lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
            np.minimum.at(self.parent, hi, lo)
            a, b = lo, hi
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            self._union_one(x, y)

    def _union_one(self, x: int, y: int) -> None:
        p = self.parent
        rx, ry = self._find_one(x), self._find_one(y)
        if rx != ry:
            p[max(rx, ry)] = min(rx, ry)

    def _find_one(self, x: int) -> int:
        p = self.parent
        for _ in range(len(p) + 1):
            px = int(p[x])
            if px == x:
                return x
            p[x] = p[px]  # path halving
            x = px
        raise RuntimeError("union-find parent cycle")  # impossible: parents point downwards

    def compress(self) -> None:
        """Point every element straight at its root (pointer jumping: log2(depth) rounds)."""
        p = self.parent
        for _ in range(64):
            gp = p[p]
            if np.array_equal(gp, p):
                return
            p[:] = gp
        raise RuntimeError("union-find did not converge")

    def roots(self) -> IntArray:
        self.compress()
        return self.parent


def groups_of(roots: IntArray, rank: IntArray) -> list[tuple[int, list[int]]]:
    """(keep, [remove...]) for every set with more than one member; keep = the member of highest rank."""
    n = len(roots)
    if n == 0:
        return []
    sizes = np.bincount(roots, minlength=n)
    members = np.flatnonzero(sizes[roots] > 1)
    if members.size == 0:
        return []
    ordered = members[np.lexsort((rank[members], roots[members]))]
    r = roots[ordered]
    cuts = np.flatnonzero(np.diff(r)) + 1
    out: list[tuple[int, list[int]]] = []
    for chunk in np.split(ordered, cuts):
        items = chunk.tolist()
        out.append((items[-1], items[:-1]))
    return out


class NearDuplicateFinder:
    """Pairs at cosine >= threshold over the upper triangle of X·Xᵀ, tile by tile, merged in union-find.

    Memory: the unit-length matrix (n x d float32, owned: normalised in place), one tile of
    BLOCK_ROWS x BLOCK_COLS float32 and its mask, the pairs of one tile, and the n-long parent array.
    `step()` handles one row block against every column at or right of it; callers run it in a worker
    thread and may stop between steps.
    """

    def __init__(
        self, vectors: FloatMatrix, threshold: float, block_rows: int = BLOCK_ROWS, block_cols: int = BLOCK_COLS
    ) -> None:
        x = vectors if vectors.dtype == np.float32 else vectors.astype(np.float32)
        if x.ndim != 2:
            raise ValueError(f"vectors must be a matrix, got shape {x.shape}")
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))  # no n x d temporary (np.linalg.norm makes one)
        norms[norms == 0] = 1.0
        x /= norms[:, None]
        self._x = x
        self._n = int(x.shape[0])
        self._threshold = np.float32(threshold)
        self._rows = max(1, block_rows)
        self._cols = max(1, block_cols)
        self._next = 0
        self.sets = DisjointSets(self._n)
        self.pairs = 0
        self.tiles = 0

    @property
    def done(self) -> bool:
        return self._next >= self._n

    @property
    def steps_left(self) -> int:
        return -(-(self._n - self._next) // self._rows)

    def step(self) -> None:
        i0 = self._next
        i1 = min(self._n, i0 + self._rows)
        rows = self._x[i0:i1]
        found = 0
        for j0 in range(i0, self._n, self._cols):
            j1 = min(self._n, j0 + self._cols)
            mask = (rows @ self._x[j0:j1].T) >= self._threshold
            self.tiles += 1
            hit_rows = np.flatnonzero(mask.any(axis=1))  # few rows have a partner: index only those
            if hit_rows.size == 0:
                continue
            r, c = np.nonzero(mask[hit_rows])
            a = hit_rows[r].astype(np.int64) + i0
            b = c.astype(np.int64) + j0
            upper = b > a  # the upper triangle only (a tile crossing the diagonal holds both halves)
            if not upper.all():
                a, b = a[upper], b[upper]
            if a.size:
                self.sets.union(a, b)
                found += int(a.size)
        if found:
            self.pairs += found
            self.sets.compress()
        self._next = i1

    def run(self) -> None:
        for _ in range(self.steps_left):
            self.step()

    def groups(self, rank: IntArray) -> list[tuple[int, list[int]]]:
        return groups_of(self.sets.roots(), rank)


class BoundaryCollector:
    """One boundary's memories as they stream in, exact duplicates settled on the way.

    Each distinct hash owns one row (id, stamp, vector) held by its newest memory so far; every other
    memory of that hash is recorded as an exact duplicate of the hash. The matrix grows by half when
    full, so a boundary costs about (distinct contents) x dim x 4 bytes.
    """

    def __init__(self, expected: int = 0) -> None:
        self._expected = max(16, expected)
        self.ids: list[str] = []
        self.hashes: list[str] = []
        self.stamps: list[int] = []
        self._matrix: FloatMatrix | None = None
        self._row_of_hash: dict[str, int] = {}
        self.exact_removed: dict[str, list[str]] = {}  # hash -> the older memories of that hash
        self.scanned = 0

    @property
    def rows(self) -> int:
        return len(self.ids)

    @property
    def matrix(self) -> FloatMatrix:
        if self._matrix is None:
            return np.zeros((0, 0), dtype=np.float32)
        return self._matrix[: self.rows]

    def add(self, ids: Sequence[str], hashes: Sequence[str], stamps: Sequence[int], vectors: FloatMatrix) -> None:
        if not len(ids):
            return
        if self._matrix is None:
            self._matrix = np.empty((self._expected, vectors.shape[1]), dtype=np.float32)
        elif vectors.shape[1] != self._matrix.shape[1]:
            raise ValueError(f"vector dimension changed within a boundary: {vectors.shape[1]}")
        for k, (mid, h, st) in enumerate(zip(ids, hashes, stamps, strict=True)):
            self.scanned += 1
            row = self._row_of_hash.get(h)
            if row is None:
                row = self.rows
                if row >= self._matrix.shape[0]:
                    grown = np.empty((row + row // 2 + 16, self._matrix.shape[1]), dtype=np.float32)
                    grown[:row] = self._matrix[:row]
                    self._matrix = grown
                self._row_of_hash[h] = row
                self.ids.append(mid)
                self.hashes.append(h)
                self.stamps.append(st)
                self._matrix[row] = vectors[k]
            elif (st, mid) > (self.stamps[row], self.ids[row]):
                self.exact_removed.setdefault(h, []).append(self.ids[row])
                self.ids[row], self.stamps[row] = mid, st
                self._matrix[row] = vectors[k]
            else:
                self.exact_removed.setdefault(h, []).append(mid)

    def exact_groups(self) -> list[tuple[str, list[str]]]:
        """(keep id, [removed ids]) per hash with duplicates, in a stable order."""
        return sorted(
            ((self.ids[self._row_of_hash[h]], sorted(removed)) for h, removed in self.exact_removed.items()),
        )

    def rank(self) -> IntArray:
        return newest_rank(self.stamps, self.ids)


@dataclass
class BoundaryPlan:
    """What a sweep of one boundary removes: (keep, [remove]) per group, as ids."""

    exact: list[tuple[str, list[str]]]
    near: list[tuple[str, list[str]]]
    scanned: int
    near_scanned: int

    def survivor_of(self) -> dict[str, str]:
        """removed id -> the memory that stays in the end (an exact keep may itself be near-removed)."""
        near_to = {r: keep for keep, removed in self.near for r in removed}
        out = {r: keep for keep, removed in self.near for r in removed}
        for keep, removed in self.exact:
            final = near_to.get(keep, keep)
            for r in removed:
                out[r] = final
        return out


def plan_boundary(
    memories: Iterable[tuple[str, str, int, Sequence[float]]],
    threshold: float,
    block_rows: int = BLOCK_ROWS,
    block_cols: int = BLOCK_COLS,
) -> BoundaryPlan:
    """The whole algorithm on (id, hash, created_at stamp, vector) tuples of one boundary, synchronously
    (the sweep runs the same pieces step by step off the event loop)."""
    collector = BoundaryCollector()
    items = list(memories)
    if items:
        vectors = np.asarray([v for *_, v in items], dtype=np.float32)
        collector.add([i for i, *_ in items], [h for _, h, *_ in items], [s for _, _, s, _ in items], vectors)
    return _finish_plan(collector, threshold, block_rows, block_cols)


def _finish_plan(collector: BoundaryCollector, threshold: float, block_rows: int, block_cols: int) -> BoundaryPlan:
    finder = NearDuplicateFinder(collector.matrix.copy(), threshold, block_rows, block_cols)
    finder.run()
    ids = collector.ids
    near = [(ids[k], sorted(ids[r] for r in rem)) for k, rem in finder.groups(collector.rank())]
    return BoundaryPlan(collector.exact_groups(), sorted(near), collector.scanned, collector.rows)


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
    """Redis keys, prefixed with ARQ_QUEUE_NAME like the queue's own (deployments sharing a Redis stay apart)."""

    prefix: str

    @property
    def lock(self) -> str:
        return f"{self.prefix}:dedup:lock"

    @property
    def runs(self) -> str:
        return f"{self.prefix}:dedup:runs"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}:dedup:run:{run_id}"

    @property
    def pending(self) -> str:
        return f"{self.prefix}:dedup:graph_pending"


class RunLock:
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


class RunStore:
    """Run reports: `<queue>:dedup:run:<id>` (JSON, TASK_TTL_SECONDS) and `<queue>:dedup:runs` (a sorted
    set of run ids by start time, the newest RUNS_KEPT)."""

    def __init__(self, redis: ArqRedis, settings: Settings) -> None:
        self._redis = redis
        self._keys = DedupKeys(settings.arq_queue_name)
        self._ttl = settings.task_ttl_seconds
        self._timeout = settings.redis_timeout_seconds
        self._url = settings.safe_redis_url

    async def _guard(self, what: str, coro: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout * 4):
                return await coro
        except (RedisError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"dedup run records unavailable ({what}): redis at {self._url}") from exc

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


async def _aw(value: Awaitable[_T] | _T) -> _T:
    """redis-py's async methods are typed as `Awaitable[T] | T`; ours are always awaitable."""
    return await value if inspect.isawaitable(value) else value


class PendingGraph:
    """Graph removals applied to the vectors but not (yet) to the graph: a Redis hash
    removed id -> {"dup": survivor id, "user": user id, "at": removal time, "run": run id}."""

    def __init__(self, redis: ArqRedis, key: str, timeout_s: float) -> None:
        self._redis = redis
        self._key = key
        self._timeout = timeout_s

    async def _guard(self, what: str, value: Awaitable[_T] | _T) -> _T:
        try:
            async with asyncio.timeout(self._timeout):
                return await _aw(value)
        except (RedisError, OSError, TimeoutError) as exc:
            raise DependencyUnavailable(f"dedup pending graph set unavailable ({what}): {exc}") from exc

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


# =================================================================================================
# The sweep
# =================================================================================================


@dataclass
class _Run:
    report: DedupRunReport
    dry_run: bool
    cutoff: int  # stamp of the run's start: later writes are not part of it
    deadline: float  # time.monotonic() after which the run stops between steps
    lock: RunLock
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


class DedupSweep:
    """Runs one dedup sweep over the vector store (and the graph behind it) under the Redis run lock."""

    def __init__(
        self,
        settings: Settings,
        vectors: VectorStore,
        graph: GraphStore,
        redis: ArqRedis,
        *,
        block_rows: int = BLOCK_ROWS,
        block_cols: int = BLOCK_COLS,
    ) -> None:
        self.settings = settings
        self.vectors = vectors
        self.graph = graph
        self.redis = redis
        self.keys = DedupKeys(settings.arq_queue_name)
        self.runs = RunStore(redis, settings)
        self.pending = PendingGraph(redis, self.keys.pending, settings.redis_timeout_seconds * 4)
        self.locks = MemoryLocks(redis, settings)
        self.block_rows = block_rows
        self.block_cols = block_cols
        self.threshold = settings.dedup_similarity_threshold
        self.batch_size = settings.dedup_batch_size

    @classmethod
    def from_deps(cls, deps: Deps) -> DedupSweep:
        return cls(deps.settings, deps.vectors, deps.graph, deps.redis)

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
        lock = RunLock(self.redis, self.keys.lock, run_id)
        try:
            acquired = await lock.acquire()
            holder = None if acquired else await lock.holder()
        except (RedisError, OSError) as exc:
            where = self.settings.safe_redis_url
            raise DependencyUnavailable(f"dedup lock unavailable: redis at {where}: {exc}") from exc
        if not acquired:
            report.status = "skipped"
            report.detail = f"another dedup run is in progress (run {holder}); this one did nothing"
            report.finished_at = now_iso()
            report.duration_s = 0.0
            log.warning("dedup_run_skipped", run_id=run_id, trigger=trigger, running=holder)
            await self.runs.save(report)
            return report

        state = _Run(report, dry_run, stamp_of(started) or 0, time.monotonic() + budget, lock)
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

    async def _sweep(self, state: _Run, user_id: str | None) -> None:
        report = state.report
        report.graph_retry.pending_before = await self.pending.count()
        if not state.dry_run and report.graph_retry.pending_before:
            await self._retry_pending(state)
        boundaries = await self.vectors.boundaries(user_id, MAX_BOUNDARY_LIST)
        # Smallest first: a run that reaches its budget has finished every boundary it could.
        boundaries.sort(key=lambda b: (b.count, b.user_id, b.scope.value, b.project_id or ""))
        for b in boundaries:
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
        if not state.dry_run:
            report.graph_retry.pending_after = await self.pending.count()
        else:
            report.graph_retry.pending_after = report.graph_retry.pending_before

    async def _maybe_save(self, state: _Run) -> None:
        now = time.monotonic()
        if now - state.last_save >= SAVE_EVERY_S:
            state.last_save = now
            self._fill(state)
            await self.runs.save(state.report)

    def _fill(self, state: _Run) -> None:
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

    async def _read(self, state: _Run, b: Boundary, user: DedupUserReport) -> BoundaryCollector | None:
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
                late, bad = await asyncio.to_thread(_ingest, collector, page, state.cutoff)
                user.skipped_recent += late
                unreadable += bad
            if cursor is None:
                break
        else:
            user.errors.append(f"{_where(b)}: more than {max_pages} pages; read stopped there")
        if unreadable:
            user.errors.append(f"{_where(b)}: {unreadable} memories with unreadable timestamps left alone")
        return collector

    async def _near(self, state: _Run, collector: BoundaryCollector) -> list[tuple[int, list[int]]] | None:
        if collector.rows < 2:
            return []
        finder = await asyncio.to_thread(
            NearDuplicateFinder, collector.matrix, self.threshold, self.block_rows, self.block_cols
        )
        for _ in range(finder.steps_left):
            if state.should_stop():
                return None
            await asyncio.to_thread(finder.step)  # BLAS releases the GIL; the loop runs between blocks too
        return await asyncio.to_thread(lambda: finder.groups(collector.rank()))

    async def _boundary(self, state: _Run, b: Boundary, user: DedupUserReport) -> None:
        collector = await self._read(state, b, user)
        if collector is None:
            return  # stopped while reading: nothing of this boundary is touched
        near_rows = await self._near(state, collector)
        if near_rows is None:
            user.near.errors.append(f"{_where(b)}: near phase not finished ({state.stopped})")
        plan, survivor, read_hash = await asyncio.to_thread(_plan, collector, near_rows or [])
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
        self, state: _Run, b: Boundary, user: DedupUserReport, plan: BoundaryPlan, survivor: dict[str, str],
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
                for batch in _chunks(exact_ids + near_ids, STORE_BATCH):
                    await self.vectors.delete(batch)
                    deleted.update(batch)
            except DependencyUnavailable as exc:
                failure = exc
            not_deleted = [r for r in removable if r not in deleted]
            if not_deleted:  # the graph must not lose memories whose vectors are still there
                await self.pending.done(not_deleted)
        _record(user.exact, plan.exact, removable, deleted, plan.scanned)
        _record(user.near, plan.near, removable, deleted, plan.near_scanned)
        if failure is not None:
            raise failure
        if state.dry_run or not deleted:
            return
        log.info("dedup_boundary_removed", user_id=b.user_id, scope=b.scope.value, project_id=b.project_id,
                 exact=len(exact_ids), near=len(near_ids))
        for phase, removed in ((user.exact, exact_ids), (user.near, near_ids)):
            if removed:
                await self._graph_part(state, phase, removed, {r: removable[r] for r in removed}, now)

    async def _unchanged(
        self, state: _Run, b: Boundary, ids: set[str], read_hash: dict[str, str]
    ) -> set[str]:
        """The ids that still exist in this boundary as they were read (same hash, not updated since)."""
        ok: set[str] = set()
        for batch in _chunks(sorted(ids), STORE_BATCH):
            for m in await self.vectors.get(batch):
                if _same(m, b, read_hash.get(m.id), state.cutoff):
                    ok.add(m.id)
        return ok

    async def _graph_part(
        self, state: _Run, phase: DedupPhaseReport, ids: list[str], duplicate_of: dict[str, str], now: str
    ) -> None:
        if state.graph_down:
            phase.errors.append(f"graph part of {len(ids)} removals left pending: graph unavailable "
                                f"earlier in this run ({state.graph_down})")
            return
        for batch in _chunks(ids, STORE_BATCH):
            if state.should_stop():
                phase.errors.append(f"graph part of {len(batch)} removals left pending: {state.stopped}")
                continue
            try:
                expired = await self._remove_from_graph(batch, {r: duplicate_of[r] for r in batch}, now)
            except Exception as exc:  # a graph error never blocks the vector phase: reported, retried next run
                state.graph_down = f"{type(exc).__name__}: {exc}"[:300]
                phase.errors.append(f"graph part of {len(ids)} removals left pending: {state.graph_down}")
                log.warning("dedup_graph_failed", error=state.graph_down, pending=len(ids))
                return
            await self.pending.done(batch)
            phase.graph_edges_expired += len(expired)
            _extend_capped(phase.graph_expired_edge_ids, expired, phase)

    async def _remove_from_graph(self, ids: list[str], duplicate_of: dict[str, str], now: str) -> list[str]:
        """Issue 5's graph rule, in one idempotent call: removed (:Memory) nodes get deleted_at and
        duplicate_of -> survivor; RELATES edges only removed memories supported expire; edges the
        survivor (or any live memory) also supports keep living without the removed ids."""
        return await self.graph.remove_memories(ids, now, duplicate_of)

    async def _retry_pending(self, state: _Run) -> None:
        retry = state.report.graph_retry
        entries = await self.pending.read(MAX_PENDING_PER_RUN)
        if not entries:
            return
        # Removed memories must really be gone from the vectors (a failed delete is not a removal).
        ids = sorted(entries)
        still_there: set[str] = set()
        for batch in _chunks(ids, STORE_BATCH):
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
        for batch in _chunks(sorted(set(final.values())), STORE_BATCH):
            exists |= {m.id for m in await self.vectors.get(batch)}
        by_time: dict[str, list[str]] = {}
        for rid, entry in live.items():
            by_time.setdefault(entry["at"], []).append(rid)
        for at, rids in sorted(by_time.items()):
            for batch in _chunks(sorted(rids), STORE_BATCH):
                if state.should_stop():
                    retry.errors.append(f"{len(batch)} pending graph removals not retried: {state.stopped}")
                    continue
                dups = {r: final[r] for r in batch if final[r] in exists}
                try:
                    if dups:
                        expired = await self._remove_from_graph(batch, dups, at)
                    else:
                        expired = await self.graph.remove_memories(batch, at)
                except Exception as exc:  # still down: stays pending for the next run
                    state.graph_down = f"{type(exc).__name__}: {exc}"[:300]
                    retry.errors.append(f"pending graph removals still failing: {state.graph_down}")
                    log.warning("dedup_graph_retry_failed", error=state.graph_down, pending=len(live))
                    return
                await self.pending.done(batch)
                retry.retried += len(batch)
                retry.graph_edges_expired += len(expired)
        log.info("dedup_graph_retried", retried=retry.retried, expired=retry.graph_edges_expired)


def _ingest(collector: BoundaryCollector, page: list[VectorRecord], cutoff: int) -> tuple[int, int]:
    """Add one page to the collector (worker thread). Returns (written after the cutoff, unreadable)."""
    ids: list[str] = []
    hashes: list[str] = []
    stamps: list[int] = []
    vecs: list[list[float]] = []
    late = bad = 0
    for rec in page:
        m = rec.memory
        created, updated = stamp_of(m.created_at), stamp_of(m.updated_at)
        stored = stamp_of(m.stored_at) if m.stored_at else None
        if created is None or updated is None:
            bad += 1
        elif created > cutoff or updated > cutoff or (stored is not None and stored > cutoff):
            late += 1
        else:
            ids.append(m.id)
            hashes.append(m.hash)
            stamps.append(created)
            vecs.append(rec.vector)
    if ids:
        collector.add(ids, hashes, stamps, np.asarray(vecs, dtype=np.float32))
    return late, bad


def _plan(
    collector: BoundaryCollector, near_rows: list[tuple[int, list[int]]]
) -> tuple[BoundaryPlan, dict[str, str], dict[str, str]]:
    """The boundary's plan as ids (worker thread): groups, removed id -> final survivor, and the hash
    each involved memory had when read (exact duplicates share their group's hash)."""
    ids = collector.ids
    near = sorted((ids[k], sorted(ids[r] for r in rem)) for k, rem in near_rows)
    plan = BoundaryPlan(collector.exact_groups(), near, collector.scanned, collector.rows)
    survivor = plan.survivor_of()
    involved = set(survivor) | set(survivor.values())
    read_hash = {i: h for i, h in zip(ids, collector.hashes, strict=True) if i in involved}
    for h, removed in collector.exact_removed.items():
        read_hash.update(dict.fromkeys(removed, h))
    return plan, survivor, read_hash


def _same(m: Memory, b: Boundary, read_hash: str | None, cutoff: int) -> bool:
    updated = stamp_of(m.updated_at)
    stored = stamp_of(m.stored_at) if m.stored_at else None
    return (
        read_hash is not None
        and m.hash == read_hash
        and updated is not None
        and updated <= cutoff
        and (stored is None or stored <= cutoff)
        and m.user_id == b.user_id
        and m.scope == b.scope
        and (b.project_id is None or m.project_id == b.project_id)
    )


def _record(
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


def _extend_capped(target: list[str], items: list[str], phase: DedupPhaseReport) -> None:
    room = REPORT_MAX_IDS - len(target)
    target += items[: max(0, room)]
    if len(items) > room:
        phase.truncated = True


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _where(b: Boundary) -> str:
    return "global" if b.project_id is None else f"project {b.project_id}"


# =================================================================================================
# Entry points: API submission, the on-demand job, the cron
# =================================================================================================


def summary(report: DedupRunReport) -> dict[str, Any]:
    return {
        "run_id": report.run_id,
        "status": report.status,
        "dry_run": report.dry_run,
        "detail": report.detail,
        "totals": report.totals.model_dump(),
        "run_url": f"/v1/maintenance/runs/{report.run_id}",
    }


async def submit_dedup(deps: Deps, req: DedupRequest) -> DedupAccepted:
    """POST /v1/maintenance/dedup: enqueue a run through the task queue (task id = run id).

    Every request is a new run (the identity carries the request time): repeating "run now" must run
    again, and the lock keeps overlapping runs from both working."""
    identity = {"user_id": req.user_id, "dry_run": req.dry_run, "requested_ns": time.time_ns()}
    task_id = await deps.tasks.enqueue(DedupJob(user_id=req.user_id, dry_run=req.dry_run), identity)
    queued = DedupRunReport(
        run_id=task_id, trigger="api", status="queued", dry_run=req.dry_run, user_id=req.user_id, task_id=task_id,
        threshold=deps.settings.dedup_similarity_threshold, batch_size=deps.settings.dedup_batch_size,
        queued_at=now_iso(),
    )
    await RunStore(deps.redis, deps.settings).save(queued, only_new=True)  # the worker may have started it
    log.info("dedup_run_queued", run_id=task_id, user_id=req.user_id, dry_run=req.dry_run)
    return DedupAccepted(
        task_id=task_id, poll_url=f"/v1/memories/status/{task_id}", run_id=task_id,
        run_url=f"/v1/maintenance/runs/{task_id}",
    )


async def run_requested_dedup(deps: Deps, task_id: str, job: DedupJob) -> dict[str, Any]:
    """The job of a POST /v1/maintenance/dedup (ARQ function `maintenance_dedup`)."""
    report = await DedupSweep.from_deps(deps).run(
        task_id, trigger="api", user_id=job.user_id, dry_run=job.dry_run, task_id=task_id, queued_at=job.accepted_at,
    )
    return summary(report)


async def submit_reconcile(deps: Deps, req: ReconcileRequest) -> DedupAccepted:
    """POST /v1/maintenance/reconcile: a full reconcile through the task queue (task id = run id)."""
    identity = {"user_id": req.user_id, "dry_run": req.dry_run, "requested_ns": time.time_ns()}
    task_id = await deps.tasks.enqueue(ReconcileJob(user_id=req.user_id, dry_run=req.dry_run), identity)
    queued = DedupRunReport(run_id=task_id, kind="reconcile", trigger="api", status="queued", dry_run=req.dry_run,
                            user_id=req.user_id, task_id=task_id, queued_at=now_iso())
    await RunStore(deps.redis, deps.settings).save(queued, only_new=True)
    return DedupAccepted(task_id=task_id, poll_url=f"/v1/memories/status/{task_id}", run_id=task_id,
                         run_url=f"/v1/maintenance/runs/{task_id}")


def make_runs(deps: Deps) -> RunStore:
    return RunStore(deps.redis, deps.settings)

