"""VectorStore on an embedded Qdrant Edge shard (`qdrant-edge-py`): the default, no server needed.

Layout: one shard directory per collection, `<path>/<collection>/`. Edge owns `wal/`, `segments/` and
`edge_config.json` in it; we add `memory_store.json`, a sidecar naming the embedder and dimension the
vectors were made with, so a restart with another embedder fails loudly instead of mixing spaces.

Facts about qdrant-edge-py 0.9.0 this module relies on (checked, not assumed):
- Only one `EdgeShard` may hold a directory: a second open (even from another process) fails with
  "failed to open WAL ... WouldBlock". API and worker therefore cannot both open the same shard.
- Updates go to a write-ahead log before `update()` returns, so a SIGKILL right after an upsert
  loses nothing (the next `load` replays the WAL). `flush()` persists segments and costs a few ms
  to hundreds of ms, so it runs on `close()` only, not per write.
- Calls are safe from several threads (the shard locks internally), but none of them releases the
  GIL: `asyncio.to_thread` keeps the loop responsive *between* calls only. `optimize()` (building
  HNSW) holds the GIL for its whole run (~seconds to a minute), freezing every thread of the process.
- All shard errors are plain `Exception("Service runtime error: ...")`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import qdrant_edge as qe
import structlog

from service.domain import Memory, Scope
from service.errors import Conflict, DependencyUnavailable, StoreConfigError
from service.stores.lexical import Bm25Encoder
from service.stores.qdrant_common import (
    EMBEDDER_KEYS,
    FilterBuilder,
    check_embedder,
    embedder_record,
    ids_condition,
    memory_of,
    parse_cursor,
    payload_of,
    plain_vector,
    valid_ids,
)
from service.stores.vector import (
    FILTER_FIELDS,
    INDEXED_FIELDS,
    LEXICAL_VECTOR,
    TIME_FIELD,
    Boundary,
    MemoryFilter,
    RankRequest,
    ScoredMemory,
    VectorRecord,
)

log = structlog.get_logger(__name__)
SIDECAR = "memory_store.json"
LAYOUT = 2  # 1: one dense vector; 2: + the BM25 sparse vector and the occurred_at index
MIGRATED = "MIGRATED"
CHANGES = "changes_since_build"
_T = TypeVar("_T")


class EdgeVectorStore:
    name = "qdrant_edge"

    def __init__(self, path: Path, collection: str) -> None:
        self._dir = Path(path) / collection
        self._collection = collection
        self._shard: qe.EdgeShard | None = None
        self._dim: int | None = None
        self._record: dict[str, Any] = {}  # the embedder the shard's vectors come from (qdrant_common.check_embedder)
        self._write_lock = asyncio.Lock()
        self._closed = False
        self._journal: list[qe.UpdateOperation] | None = None  # updates made while a copy is optimized
        self._serving = asyncio.Event()  # cleared while an optimized copy is swapped in: reads wait
        self._serving.set()
        self._in_flight = 0
        self._optimizing: asyncio.Task[Any] | None = None  # the running optimize(), cancelled by close()
        self.last_optimize: dict[str, Any] = {}
        # Points written or deleted since the last index build. Deletes count: Edge only tombstones a deleted
        # point, so a shard whose size stays constant under churn still grows (in RAM too) until a build
        # vacuums it. Kept in the sidecar across restarts.
        self._changes = 0

    # ---------------------------------------------------------------------------------------
    # lifecycle
    # ---------------------------------------------------------------------------------------

    async def ensure_collection(self, dim: int, embedder: str, variant: str = "",
                                compatible: frozenset[str] = frozenset(), allow_change: bool = False) -> None:
        async with self._write_lock:
            if self._closed:
                raise DependencyUnavailable("qdrant edge store is closed")
            if self._shard is not None:
                update = check_embedder(self._record, dim, embedder, variant, compatible=compatible,
                                        allow_change=allow_change, where=self._where)
                if update is not None:
                    self._record = update
                    await asyncio.to_thread(self._write_sidecar, self._dir, self._changes)
                return
            self._shard = await asyncio.to_thread(self._open_shard, dim, embedder, variant, compatible, allow_change)
            self._dim = dim

    async def record_embedder(self, dim: int, embedder: str, variant: str = "") -> None:
        async with self._write_lock:
            self._record = embedder_record(dim, embedder, variant)
            await asyncio.to_thread(self._write_sidecar, self._dir, self._changes)
        log.info("vector_store_embedder_recorded", embedder=embedder, dim=dim, variant=variant)

    async def recorded_embedder(self) -> dict[str, Any]:
        return dict(self._record)

    @property
    def _where(self) -> str:
        return f"'{self._collection}' at {self._dir}"

    def _open_shard(self, dim: int, embedder: str, variant: str, compatible: frozenset[str],
                    allow_change: bool) -> qe.EdgeShard:
        self._finish_migration()
        self._dir.mkdir(parents=True, exist_ok=True)
        stored = self._read_sidecar()
        update = check_embedder(stored, dim, embedder, variant, compatible=compatible, allow_change=allow_change,
                                where=self._where)
        self._record = update or {k: v for k, v in (stored or {}).items() if k in EMBEDDER_KEYS}
        exists = (self._dir / "edge_config.json").exists()
        if exists and stored is not None and int(stored.get("layout", 1)) < LAYOUT:
            self._migrate(dim)
        try:
            # With a config, load() checks it against the segments (size, distance, vector names).
            shard = qe.EdgeShard.load(str(self._dir), _config(dim)) if exists else qe.EdgeShard.create(
                str(self._dir), _config(dim))
        except Exception as e:
            msg = str(e)
            if "incompatible" in msg.lower():
                raise StoreConfigError(
                    f"vector collection {self._where} does not fit the configured embedder '{embedder}' (dim {dim}): "
                    f"{msg}. Set QDRANT_COLLECTION to another name, or reset the vector data (delete {self._dir})."
                ) from e
            if "WouldBlock" in msg:
                raise DependencyUnavailable(
                    f"qdrant edge shard {self._dir} is already open in another process or store "
                    "(only one may hold it); set QDRANT_URL to share vectors between processes"
                ) from e
            raise DependencyUnavailable(f"cannot open qdrant edge shard {self._dir}: {msg}") from e
        try:
            self._changes = _changes_of(stored, shard)
            if update is not None:
                self._write_sidecar(self._dir, self._changes)
            _ensure_indexes(shard)
        except BaseException:
            shard.close()
            raise
        return shard

    # A shard made before the lexical retriever (layout 1: one dense vector) cannot gain a sparse vector in
    # place (Edge refuses the config), so it is copied once, at start, into a new shard with BM25 vectors
    # (and occurred_at = created_at where missing). The old directory is kept beside it as `<dir>.layout1`.
    def _migrate(self, dim: int) -> None:
        target = self._dir.with_name(self._dir.name + ".migrating")
        shutil.rmtree(target, ignore_errors=True)
        old = qe.EdgeShard.load(str(self._dir))
        new = qe.EdgeShard.create(str(target), _config(dim))
        moved, offset = 0, None
        try:
            for _ in range(1_000_000):  # bounded: pages of 1,000
                records, offset = old.scroll(qe.ScrollRequest(offset=offset, limit=1000, with_payload=True,
                                                              with_vector=True))
                points = []
                for r in records:
                    memory = memory_of(r.id, r.payload)
                    if memory.occurred_at is None:
                        memory = memory.model_copy(update={"occurred_at": memory.created_at})
                    points.append(_point(memory, plain_vector(r.vector)))
                if points:
                    new.update(qe.UpdateOperation.upsert_points(points))
                moved += len(points)
                if offset is None:
                    break
            _ensure_indexes(new)
            new.flush()
        finally:
            new.close()
            old.close()
        self._write_sidecar(target, moved)  # a new shard: every point is outside the index
        (target / MIGRATED).touch()
        self._finish_migration()
        log.info("qdrant_edge_migrated", path=str(self._dir), layout=LAYOUT, points=moved,
                 kept=str(self._dir.with_name(self._dir.name + ".layout1")))

    def _finish_migration(self) -> None:
        """Swap a completed migration in (also after a crash between its two renames); drop an unfinished one.
        Also undo an optimize swap a crash interrupted (`optimize`), and drop a copy left half-optimized."""
        old, marker, staged = self._sibling("old"), self._sibling("swap"), self._sibling("next")
        if old.exists() and (marker.exists() or not self._dir.exists()):
            shutil.rmtree(self._dir, ignore_errors=True)  # the optimized copy may lack journaled updates
            old.rename(self._dir)
        marker.unlink(missing_ok=True)
        shutil.rmtree(staged, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
        target = self._dir.with_name(self._dir.name + ".migrating")
        if not target.exists():
            return
        if not (target / MIGRATED).exists():
            shutil.rmtree(target, ignore_errors=True)
            return
        if self._dir.exists():
            backup = self._dir.with_name(self._dir.name + ".layout1")
            shutil.rmtree(backup, ignore_errors=True)
            self._dir.rename(backup)
        (target / MIGRATED).unlink()
        target.rename(self._dir)

    def _read_sidecar(self) -> dict[str, Any] | None:
        p = self._dir / SIDECAR
        if not p.exists():
            return None
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise StoreConfigError(f"unreadable vector store metadata {p}: {e}") from e
        if not isinstance(data, dict):
            raise StoreConfigError(f"unreadable vector store metadata {p}: not a JSON object")
        return data

    def _write_sidecar(self, where: Path, changes: int = 0) -> None:
        """`changes`: points written or deleted since the last index build (`index_backlog`)."""
        p = where / SIDECAR
        tmp = p.with_suffix(".tmp")
        body = {**self._record, "distance": "cosine", "collection": self._collection, "layout": LAYOUT,
                CHANGES: changes}
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(body, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)

    async def close(self) -> None:
        building = self._optimizing
        if building is not None and building is not asyncio.current_task():
            building.cancel()  # its cleanup kills the child process and drops the copy
            with contextlib.suppress(BaseException):
                await building
        async with self._write_lock:
            self._closed = True
            shard, self._shard = self._shard, None
            if shard is None:
                return

            def _close() -> None:
                try:
                    shard.flush()
                    self._write_sidecar(self._dir, self._changes)
                finally:
                    shard.close()

            await asyncio.to_thread(_close)

    async def ping(self) -> None:
        await self._run(lambda s: s.info())

    async def optimize(self) -> bool:
        """Build the indexes (segment merge + HNSW) without holding this process's GIL for the build.

        1. Under the write lock: flush, copy the shard directory to `<dir>.next`, start a journal of updates.
        2. A child process (`service.stores.edge_optimize`) optimizes the copy; reads and writes go on here.
        3. Under the write lock, with reads paused: close the live shard, swap the directories (the old one
           is kept as `<dir>.old` until the end, and a `<dir>.swap` marker says a swap is under way), load the
           optimized shard, replay the journal, flush; drop the marker and the old directory.
        A crash at any step leaves either the live shard or, after step 3 started, `<dir>.old` with every
        update: the next start restores it (`_finish_migration`). Returns True when it changed anything."""
        if self._shard is None:
            raise DependencyUnavailable(f"qdrant edge store {self._dir} is not open")
        if self._optimizing is not None:
            raise Conflict(f"an index build of {self._dir} is already running")
        self._optimizing = asyncio.current_task()
        try:
            return await self._optimize()
        finally:
            self._optimizing = None

    async def _optimize(self) -> bool:
        staged = self._sibling("next")
        async with self._write_lock:
            await self._run(lambda s: s.flush())
            await asyncio.to_thread(shutil.rmtree, staged, True)
            await asyncio.to_thread(shutil.copytree, self._dir, staged)
            self._journal = []
            seen = self._changes  # what the build will fold in; changes made meanwhile stay in the backlog
        try:
            started = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "service.stores.edge_optimize", str(staged),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            try:
                out, err = await proc.communicate()
            except BaseException:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                raise
            if proc.returncode != 0:
                raise DependencyUnavailable(f"optimizing {staged} failed (exit {proc.returncode}): "
                                            f"{err.decode(errors='replace')[-500:]}")
            figures = json.loads(out.decode().strip().splitlines()[-1])
            build_s = time.perf_counter() - started
            async with self._write_lock:
                self._changes -= seen
                self._write_sidecar(staged, self._changes)
                pause_s = await self._swap_in(staged)
        except BaseException:
            self._journal = None
            await asyncio.to_thread(shutil.rmtree, staged, True)
            raise
        self.last_optimize = {**figures, "build_seconds": round(build_s, 2), "swap_pause_ms": round(pause_s * 1000, 1)}
        log.info("qdrant_edge_optimized", path=str(self._dir), **self.last_optimize)
        return bool(figures.get("changed"))

    async def _swap_in(self, staged: Path) -> float:
        """Step 3 of `optimize` (the caller holds the write lock); returns how long reads were paused."""
        old, marker = self._sibling("old"), self._sibling("swap")
        self._serving.clear()
        paused = time.perf_counter()
        try:
            for _ in range(10_000):  # bounded: in-flight reads finish in milliseconds
                if self._in_flight == 0:
                    break
                await asyncio.sleep(0.001)
            live, self._shard = self._shard, None
            journal, self._journal = self._journal or [], None

            def swap() -> qe.EdgeShard:
                assert live is not None
                live.flush()
                live.close()
                marker.touch()
                shutil.rmtree(old, ignore_errors=True)
                self._dir.rename(old)
                staged.rename(self._dir)
                shard = qe.EdgeShard.load(str(self._dir))
                for op in journal:
                    shard.update(op)
                shard.flush()
                marker.unlink()
                return shard

            self._shard = await asyncio.to_thread(swap)
        finally:
            self._serving.set()
        pause = time.perf_counter() - paused
        await asyncio.to_thread(shutil.rmtree, old, True)
        return pause

    def _sibling(self, suffix: str) -> Path:
        return self._dir.with_name(f"{self._dir.name}.{suffix}")

    async def index_backlog(self) -> int:
        """Points written or deleted since the last index build (Edge's indexed_vectors_count also counts the
        always indexed sparse vectors, and nothing in its info counts deleted points, so the store counts)."""
        if self._shard is None:
            raise DependencyUnavailable(f"qdrant edge store {self._dir} is not open")
        return self._changes

    # ---------------------------------------------------------------------------------------
    # writes
    # ---------------------------------------------------------------------------------------

    async def upsert(self, memories: list[Memory], vectors: list[list[float]]) -> None:
        if len(memories) != len(vectors):
            raise ValueError(f"{len(memories)} memories but {len(vectors)} vectors")
        if not memories:
            return
        for v in vectors:
            self._check_dim(v)
        points = [_point(m, v) for m, v in zip(memories, vectors, strict=True)]
        op = qe.UpdateOperation.upsert_points(points)
        async with self._write_lock:
            await self._update(op)
            self._changes += len(points)

    async def delete(self, ids: list[str]) -> None:
        valid: list[qe.PointId] = [i for i in valid_ids(ids)]
        if not valid:
            return
        op = qe.UpdateOperation.delete_points(valid)
        async with self._write_lock:
            await self._update(op)
            self._changes += len(valid)

    # ---------------------------------------------------------------------------------------
    # reads
    # ---------------------------------------------------------------------------------------

    async def search(self, vector: list[float], flt: MemoryFilter, limit: int) -> list[ScoredMemory]:
        self._check_dim(vector)
        f = build_filter(flt)
        if f is None or limit <= 0:
            return []
        req = qe.QueryRequest(limit=limit, query=qe.Query.Nearest(list(vector)), filter=f, with_payload=True)
        points = await self._run(lambda s: s.query(req))
        return [ScoredMemory(memory_of(p.id, p.payload), float(p.score)) for p in points]

    async def search_text(self, text: str, flt: MemoryFilter, limit: int) -> list[ScoredMemory]:
        f = build_filter(flt)
        indices, values = _BM25.query(text)
        if f is None or limit <= 0 or not indices:
            return []
        corpus = _filters.tenant(flt.user_id)  # IDF over the user's memories only
        req = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(qe.SparseVector(indices, values), using=LEXICAL_VECTOR), filter=f,
            with_payload=True, params=qe.SearchParams(idf=qe.IdfParams(corpus=corpus)),
        )
        points = await self._run(lambda s: s.query(req))
        return [ScoredMemory(memory_of(p.id, p.payload), float(p.score)) for p in points]

    async def rank(self, requests: list[RankRequest]) -> list[list[tuple[str, float]]]:
        """One `query_batch` for the lot (one thread hop; Edge plans the batch as a whole)."""
        by_ids: dict[tuple[str, ...], qe.HasIdCondition | None] = {}  # one condition per id set
        built = [self._rank_request(r, by_ids) for r in requests]
        todo = [q for q in built if q is not None]
        if not todo:
            return [[] for _ in requests]
        batch = qe.QueryBatchRequest(todo)
        answers = iter(await self._run(lambda s: s.query_batch(batch)))
        return [[] if q is None else [(str(p.id), float(p.score)) for p in next(answers)] for q in built]

    def _rank_request(self, r: RankRequest, by_ids: dict[tuple[str, ...], qe.HasIdCondition | None]
                      ) -> qe.QueryRequest | None:
        f = build_filter(r.flt)
        if f is None or r.limit <= 0:
            return None
        if r.ids is not None:  # only among these memories
            only = ids_condition(by_ids, r.ids, lambda valid: qe.HasIdCondition(set(cast("list[qe.PointId]", valid))))
            if only is None:
                return None
            f = qe.Filter(must=[f, only])
        if r.vector is not None:
            self._check_dim(r.vector)
            return qe.QueryRequest(limit=r.limit, query=qe.Query.Nearest(list(r.vector)), filter=f, with_payload=False)
        indices, values = _BM25.query(r.text or "")
        if not indices:
            return None
        return qe.QueryRequest(
            limit=r.limit, query=qe.Query.Nearest(qe.SparseVector(indices, values), using=LEXICAL_VECTOR), filter=f,
            with_payload=False, params=qe.SearchParams(idf=qe.IdfParams(corpus=_filters.tenant(r.flt.user_id))),
        )

    async def held(self, ids: list[str], flt: MemoryFilter) -> set[str]:
        """By `retrieve` of the filter's fields and MemoryFilter.admits: cheaper here than a scroll filtered by
        HasIdCondition (0.4 ms for 50 ids) or reading whole memories."""
        valid: list[qe.PointId] = [i for i in valid_ids(ids)]
        if not valid:
            return set()
        records = await self._run(lambda s: s.retrieve(valid, list(FILTER_FIELDS), False))
        return {str(r.id) for r in records if flt.admits(r.payload or {})}

    async def get(self, ids: list[str]) -> list[Memory]:
        valid: list[qe.PointId] = [i for i in valid_ids(ids)]
        if not valid:
            return []
        records = await self._run(lambda s: s.retrieve(valid, True, False))
        return [memory_of(r.id, r.payload) for r in records]

    async def scroll(self, flt: MemoryFilter, limit: int, cursor: str | None = None) -> tuple[list[Memory], str | None]:
        offset = parse_cursor(cursor)
        f = build_filter(flt)
        if f is None or limit <= 0:
            return [], None
        req = qe.ScrollRequest(offset=offset, limit=limit, filter=f, with_payload=True, with_vector=False)
        records, nxt = await self._run(lambda s: s.scroll(req))
        return [memory_of(r.id, r.payload) for r in records], (None if nxt is None else str(nxt))

    async def count(self, flt: MemoryFilter | None = None) -> int:
        if flt is None:
            return await self._run(lambda s: s.count(qe.CountRequest(exact=True)))
        f = build_filter(flt)
        if f is None:
            return 0
        return await self._run(lambda s: s.count(qe.CountRequest(exact=True, filter=f)))

    async def scroll_vectors(
        self, flt: MemoryFilter, limit: int, cursor: str | None = None
    ) -> tuple[list[VectorRecord], str | None]:
        offset = parse_cursor(cursor)
        f = build_filter(flt)
        if f is None or limit <= 0:
            return [], None
        req = qe.ScrollRequest(offset=offset, limit=limit, filter=f, with_payload=True, with_vector=True)

        def _page(s: qe.EdgeShard) -> tuple[list[VectorRecord], str | None]:
            # Built in the worker thread: the event loop only receives the finished page.
            records, nxt = s.scroll(req)
            page = [VectorRecord(memory_of(r.id, r.payload), plain_vector(r.vector)) for r in records]
            return page, (None if nxt is None else str(nxt))

        return await self._run(_page)

    async def boundaries(self, user_id: str | None = None, limit: int = 100_000) -> list[Boundary]:
        if user_id is not None:
            users = [user_id]
        else:
            hits = await self._run(lambda s: s.facet(qe.FacetRequest("user_id", limit=limit, exact=True)).hits)
            users = sorted(str(h.value) for h in hits)
        out: list[Boundary] = []
        for user in users:  # short calls, one per user and kind: each Edge call holds the GIL
            count_req = qe.CountRequest(exact=True, filter=build_filter(MemoryFilter(user, scope=Scope.GLOBAL)))
            facet_req = qe.FacetRequest(
                "project_id", limit=limit, exact=True, filter=build_filter(MemoryFilter(user, scope=Scope.PROJECT))
            )

            def _count(s: qe.EdgeShard, req: qe.CountRequest = count_req) -> int:
                return s.count(req)

            def _projects(s: qe.EdgeShard, req: qe.FacetRequest = facet_req) -> list[tuple[str, int]]:
                return [(str(h.value), int(h.count)) for h in s.facet(req).hits]

            n_global = await self._run(_count)
            if n_global:
                out.append(Boundary(user, Scope.GLOBAL, None, n_global))
            out += [Boundary(user, Scope.PROJECT, p, n) for p, n in sorted(await self._run(_projects))]
        return out

    # ---------------------------------------------------------------------------------------
    # helpers
    # ---------------------------------------------------------------------------------------

    def _check_dim(self, vector: list[float]) -> None:
        if self._dim is not None and len(vector) != self._dim:
            raise StoreConfigError(
                f"vector has {len(vector)} dimensions, collection '{self._collection}' expects {self._dim}"
            )

    async def _update(self, op: qe.UpdateOperation) -> None:
        """Apply one update (the caller holds the write lock); journaled while a copy is being optimized."""
        await self._run(lambda s: s.update(op))
        if self._journal is not None:
            self._journal.append(op)

    async def _run(self, fn: Callable[[qe.EdgeShard], _T]) -> _T:
        if not self._serving.is_set():
            try:
                async with asyncio.timeout(30):
                    await self._serving.wait()
            except TimeoutError as e:
                raise DependencyUnavailable(f"qdrant edge store {self._dir}: index swap takes over 30 s") from e
        shard = self._shard
        if shard is None:
            state = "closed" if self._closed else "not initialised (call ensure_collection first)"
            raise DependencyUnavailable(f"qdrant edge store {self._dir} is {state}")
        self._in_flight += 1
        try:
            return await asyncio.to_thread(fn, shard)
        except Exception as e:
            # The bindings raise bare `Exception` for storage failures; argument errors keep their type.
            if type(e) is Exception:
                raise DependencyUnavailable(f"qdrant edge store {self._dir}: {e}") from e
            raise
        finally:
            self._in_flight -= 1


# -------------------------------------------------------------------------------------------
# payload and filters
# -------------------------------------------------------------------------------------------


def _eq(key: str, value: str) -> qe.ConditionType:
    return qe.FieldCondition(key, match=qe.MatchValue(value))


_filters: FilterBuilder[qe.ConditionType, qe.Filter] = FilterBuilder(
    eq=_eq,
    any_of=lambda key, values: qe.FieldCondition(key, match=qe.MatchAny(values)),
    all_of=lambda conds: qe.Filter(must=list(conds)),
    one_of=lambda conds: qe.Filter(should=list(conds)),
    time_range=lambda key, gte, lt: qe.FieldCondition(key, range=qe.RangeDateTime(gte=gte, lt=lt)),
)
build_filter = _filters.build
_BM25 = Bm25Encoder()


def _config(dim: int) -> qe.EdgeConfig:
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
        sparse_vectors={LEXICAL_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
    )


def _point(m: Memory, vector: list[float]) -> qe.Point:
    indices, values = _BM25.document(m.content)
    vectors: dict[str, qe.NamedVector] = {"": list(vector)}
    if indices:  # a memory with no indexable term (only stop words) has no lexical vector
        vectors[LEXICAL_VECTOR] = qe.SparseVector(indices, values)
    return qe.Point(m.id, vectors, payload_of(m))


def _changes_of(stored: dict[str, Any] | None, shard: qe.EdgeShard) -> int:
    """The backlog recorded at the last close; a sidecar written before deletes were counted has the points the
    last build saw instead."""
    if stored is not None and CHANGES in stored:
        return int(stored[CHANGES])
    return max(0, shard.info().points_count - int((stored or {}).get("indexed_points", 0)))


def _ensure_indexes(shard: qe.EdgeShard) -> None:
    have = set(shard.info().payload_schema)
    for field in INDEXED_FIELDS:
        if field not in have:
            schema: qe.PayloadSchemaType | qe.KeywordIndexParams = (
                qe.KeywordIndexParams(is_tenant=True) if field == "user_id" else qe.PayloadSchemaType.Keyword
            )
            shard.update(qe.UpdateOperation.create_field_index(field, schema))
    if TIME_FIELD not in have:
        shard.update(qe.UpdateOperation.create_field_index(TIME_FIELD, qe.PayloadSchemaType.Datetime))
