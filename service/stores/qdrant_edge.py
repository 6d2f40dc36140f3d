"""VectorStore on an embedded Qdrant Edge shard (`qdrant-edge-py`): the default, no server needed.

Layout: one shard directory per collection, `<path>/<collection>/`. Edge owns `wal/`, `segments/` and
`edge_config.json` in it; we add `memory_store.json`, a sidecar naming the embedder and dimension the
vectors were made with, so a restart with another embedder fails loudly instead of mixing spaces.

Facts about qdrant-edge-py 0.9.0 this module relies on (checked, not assumed):
- Only one `EdgeShard` may hold a directory: a second open (even from another process) fails with
  "failed to open WAL ... WouldBlock". API and worker therefore cannot both open the same shard.
- Updates go to a write-ahead log before `update()` returns, so a SIGKILL right after an upsert
  loses nothing (the next `load` replays the WAL). `flush()` persists segments and is slow next to a
  write, so it runs on `close()` only, not per write.
- Calls are safe from several threads (the shard locks internally), but none of them releases the
  GIL: `asyncio.to_thread` keeps the loop responsive *between* calls only. So a search's short reads (`rank`,
  `get`) run on the event loop itself: in a worker thread they gained nothing and cost the loop its own I/O,
  since a socket call on the loop (the graph retriever's Neo4j query) releases the GIL and then waits for the
  thread's whole Edge call to get it back (docs/retrieval.md, "Speed"). `optimize()` (building
  HNSW) holds the GIL for its whole run, freezing every thread of the process: `edge_build` runs it in a
  child process on a copy of the shard.
- All shard errors are plain `Exception("Service runtime error: ...")`.

The shard directory's config, points, indexes and start-up repairs are in `edge_layout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import qdrant_edge as qe
import structlog

from service.core.domain import ListOrder, Memory, Scope
from service.core.errors import DependencyUnavailable, StoreConfigError
from service.stores.edge_build import IndexBuild
from service.stores.edge_layout import (
    CHANGES,
    LAYOUT,
    SIDECAR,
    changes_of,
    config,
    ensure_indexes,
    finish_migration,
    migrate,
    point,
)
from service.stores.qdrant_common import (
    EMBEDDER_KEYS,
    FilterBuilder,
    RankBuilder,
    check_embedder,
    check_upsert,
    embedder_record,
    memory_of,
    parse_cursor,
    payload_of,
    plain_vector,
    ranked,
    valid_ids,
    visible_memories,
)
from service.stores.time_order import page_by_time
from service.stores.vector import (
    CREATED_FIELD,
    LEXICAL_VECTOR,
    Boundary,
    MemoryFilter,
    RankRequest,
    VectorRecord,
)

log = structlog.get_logger(__name__)
_T = TypeVar("_T")


class EdgeVectorStore(IndexBuild):
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
        finish_migration(self._dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        stored = self._read_sidecar()
        update = check_embedder(stored, dim, embedder, variant, compatible=compatible, allow_change=allow_change,
                                where=self._where)
        self._record = update or {k: v for k, v in (stored or {}).items() if k in EMBEDDER_KEYS}
        exists = (self._dir / "edge_config.json").exists()
        if exists and stored is not None and int(stored.get("layout", 1)) < LAYOUT:
            migrate(self._dir, dim, self._write_sidecar)
        try:
            # With a config, load() checks it against the segments (size, distance, vector names).
            shard = qe.EdgeShard.load(str(self._dir), config(dim)) if exists else qe.EdgeShard.create(
                str(self._dir), config(dim))
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
            self._changes = changes_of(stored, shard)
            if update is not None:
                self._write_sidecar(self._dir, self._changes)
            ensure_indexes(shard)
        except BaseException:
            shard.close()
            raise
        return shard

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
        check_upsert(memories, vectors, self._dim, self._collection)
        if not memories:
            return
        points = [point(m, v) for m, v in zip(memories, vectors, strict=True)]
        op = qe.UpdateOperation.upsert_points(points)
        async with self._write_lock:
            await self._update(op)
            self._changes += len(points)

    async def update_payload(self, memories: list[Memory]) -> None:
        valid: list[qe.PointId] = [i for i in valid_ids([m.id for m in memories])]
        found = await self._run(lambda s: s.retrieve(valid, False, False), inline=True) if valid else []
        stored = {str(r.id) for r in found}  # a payload alone never makes a point
        for m in memories:
            if m.id in stored:
                async with self._write_lock:
                    await self._update(qe.UpdateOperation.overwrite_payload([m.id], payload_of(m)))
                    self._changes += 1

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

    async def rank(self, requests: list[RankRequest]) -> list[list[tuple[str, float]]]:
        """One `query_batch` for the lot (Edge plans the batch as a whole), on the event loop."""
        built = _queries.build(requests, self._dim, self._collection)
        todo = [q for q in built if q is not None]
        if not todo:
            return [[] for _ in requests]
        batch = qe.QueryBatchRequest(todo)
        return ranked(built, await self._run(lambda s: s.query_batch(batch), inline=True))

    async def get(self, ids: list[str]) -> list[Memory]:
        valid: list[qe.PointId] = [i for i in valid_ids(ids)]
        if not valid:
            return []
        records = await self._run(lambda s: s.retrieve(valid, True, False), inline=True)
        return visible_memories(memory_of(r.id, r.payload) for r in records)

    async def scroll(self, flt: MemoryFilter, limit: int, cursor: str | None = None,
                     order: ListOrder = ListOrder.ID) -> tuple[list[Memory], str | None]:
        if order is not ListOrder.ID:
            return await page_by_time(_filters, self._by_time, self._by_id, flt, limit, cursor, order)
        offset = parse_cursor(cursor)
        f = build_filter(flt)
        if f is None or limit <= 0:
            return [], None
        return await self._by_id(f, offset, limit)

    async def _by_id(self, f: qe.Filter, offset: str | None, limit: int) -> tuple[list[Memory], str | None]:
        req = qe.ScrollRequest(offset=offset, limit=limit, filter=f, with_payload=True, with_vector=False)
        records, nxt = await self._run(lambda s: s.scroll(req))
        return [memory_of(r.id, r.payload) for r in records], (None if nxt is None else str(nxt))

    async def _by_time(self, f: qe.Filter, newest: bool, limit: int) -> list[tuple[Memory, int]]:
        """By created_at (its datetime index: edge_layout.ensure_indexes), each with its order value."""
        direction = qe.Direction.Desc if newest else qe.Direction.Asc
        req = qe.ScrollRequest(limit=limit, filter=f, with_payload=True, with_vector=False,
                               order_by=qe.OrderBy(CREATED_FIELD, direction))
        records, _ = await self._run(lambda s: s.scroll(req))
        return [(memory_of(r.id, r.payload), int(cast(int, r.order_value))) for r in records]

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

    async def _update(self, op: qe.UpdateOperation) -> None:
        """Apply one update (the caller holds the write lock); journaled while a copy is being optimized."""
        await self._run(lambda s: s.update(op))
        if self._journal is not None:
            self._journal.append(op)

    async def _run(self, fn: Callable[[qe.EdgeShard], _T], inline: bool = False) -> _T:
        """`fn(shard)` in a worker thread, or with `inline` on the event loop (a short read: see the module's
        notes on the GIL)."""
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
            return fn(shard) if inline else await asyncio.to_thread(fn, shard)
        except Exception as e:
            # The bindings raise bare `Exception` for storage failures; argument errors keep their type.
            if type(e) is Exception:
                raise DependencyUnavailable(f"qdrant edge store {self._dir}: {e}") from e
            raise
        finally:
            self._in_flight -= 1


# -------------------------------------------------------------------------------------------
# filters and rank requests in Qdrant Edge's classes
# -------------------------------------------------------------------------------------------


_filters: FilterBuilder[qe.ConditionType, qe.Filter] = FilterBuilder(
    eq=lambda key, value: qe.FieldCondition(key, match=qe.MatchValue(value)),
    any_of=lambda key, values: qe.FieldCondition(key, match=qe.MatchAny(values)),
    all_of=lambda conds: qe.Filter(must=list(conds)),
    one_of=lambda conds: qe.Filter(should=list(conds)),
    time_range=lambda key, gte, lt: qe.FieldCondition(key, range=qe.RangeDateTime(gte=gte, lt=lt)),
    is_empty=lambda key: qe.IsEmptyCondition(key),
)
build_filter = _filters.build
_queries: RankBuilder[qe.ConditionType, qe.Filter, qe.QueryRequest] = RankBuilder(
    _filters,
    has_ids=lambda valid: qe.HasIdCondition(set(cast("list[qe.PointId]", valid))),
    both=lambda f, only: qe.Filter(must=[f, only]),
    dense=lambda vector, f, limit: qe.QueryRequest(limit=limit, query=qe.Query.Nearest(vector), filter=f,
                                                   with_payload=False),
    sparse=lambda indices, values, f, limit, corpus: qe.QueryRequest(
        limit=limit, query=qe.Query.Nearest(qe.SparseVector(indices, values), using=LEXICAL_VECTOR), filter=f,
        with_payload=False, params=qe.SearchParams(idf=qe.IdfParams(corpus=corpus))),
)
