"""VectorStore on a Qdrant server through `qdrant_client.AsyncQdrantClient`.

Production passes a URL. Tests pass `local_path` (or ":memory:"), qdrant-client's pure-Python local
mode, which speaks the same API but ignores payload indexes (so they are not created there) and holds
an exclusive lock on its folder.

The embedder name and dimension live in the collection's `metadata` (qdrant-client 1.20 / Qdrant
>= 1.16). A collection created without it (by hand, or by an older version) is adopted when its
vector size matches: the metadata is then written once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import httpx
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from service.core.domain import ListOrder, Memory, Scope
from service.core.errors import DependencyUnavailable, StoreConfigError
from service.stores.qdrant_common import (
    FilterBuilder,
    RankBuilder,
    check_embedder,
    check_upsert,
    embedder_record,
    lexical_vector,
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
    INDEXED_FIELDS,
    LEXICAL_VECTOR,
    POSITION_FIELDS,
    TIME_FIELD,
    Boundary,
    MemoryFilter,
    RankRequest,
    VectorRecord,
)

# HTTP answers that mean "the store cannot serve", as opposed to a bad request from us.
_UNAVAILABLE_STATUS = {401, 403, 408, 429}


class QdrantServerVectorStore:
    name = "qdrant_server"

    def __init__(
        self,
        url_or_location: str | None,
        collection: str,
        api_key: str | None = None,
        *,
        local_path: Path | None = None,
    ) -> None:
        self._collection = collection
        self._dim: int | None = None
        self._closed = False
        if local_path is not None:
            self._where = f"local:{local_path}"
            self._local = True
            self._client = AsyncQdrantClient(path=str(local_path))
        elif url_or_location is None or url_or_location == ":memory:":
            self._where = ":memory:"
            self._local = True
            self._client = AsyncQdrantClient(location=":memory:")
        else:
            self._where = url_or_location
            self._local = False
            # No version probe in the constructor: it would be a blocking HTTP call; ping() checks.
            self._client = AsyncQdrantClient(url=url_or_location, api_key=api_key, check_compatibility=False)

    # ---------------------------------------------------------------------------------------
    # lifecycle
    # ---------------------------------------------------------------------------------------

    async def ensure_collection(self, dim: int, embedder: str, variant: str = "",
                                compatible: frozenset[str] = frozenset(), allow_change: bool = False) -> None:
        self._check_open()
        c = self._collection
        with self._errors("ensure_collection"):
            if not await self._client.collection_exists(c):
                try:
                    await self._client.create_collection(
                        c,
                        vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.COSINE),
                        sparse_vectors_config={LEXICAL_VECTOR: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
                        metadata=embedder_record(dim, embedder, variant),
                    )
                except UnexpectedResponse as e:
                    if e.status_code != 409:  # 409: another process created it first
                        raise
            info = await self._client.get_collection(c)
            vectors = info.config.params.vectors
            if not isinstance(vectors, qm.VectorParams):
                raise StoreConfigError(
                    f"vector collection '{c}' at {self._where} uses named vectors; this service needs one "
                    f"unnamed cosine vector. {self._fix_hint()}"
                )
            meta = dict(info.config.metadata or {})
            if not meta.get("embedder"):  # unrecorded: the collection's own size stands for the dimension
                meta = {"embedder": embedder, "dim": vectors.size, "variant": variant}
                await self._client.update_collection(c, metadata=meta)
            update = check_embedder(meta, dim, embedder, variant, compatible=compatible, allow_change=allow_change,
                                    where=f"'{c}' at {self._where}")
            if update is not None:
                await self._client.update_collection(c, metadata=update)
            if LEXICAL_VECTOR not in (info.config.params.sparse_vectors or {}):
                raise StoreConfigError(
                    f"vector collection '{c}' at {self._where} has no '{LEXICAL_VECTOR}' sparse vector (it was made "
                    "before lexical search). Create a new collection (QDRANT_COLLECTION) and move the memories "
                    "with `python -m service export` / `import` (they are re-embedded), see docs/deployment.md."
                )
            if vectors.distance != qm.Distance.COSINE:
                raise StoreConfigError(
                    f"vector collection '{c}' at {self._where} uses {vectors.distance} distance, "
                    f"not cosine. {self._fix_hint()}"
                )
            if not self._local:  # local mode ignores payload indexes (and warns on each)
                have = set(info.payload_schema or {})
                for field in INDEXED_FIELDS:
                    if field not in have:
                        await self._client.create_payload_index(
                            c,
                            field,
                            field_schema=qm.KeywordIndexParams(
                                type=qm.KeywordIndexType.KEYWORD, is_tenant=field == "user_id"
                            ),
                            wait=True,
                        )
                for field in (TIME_FIELD, CREATED_FIELD):  # created_at: a collection made before gains it here
                    if field not in have:
                        await self._client.create_payload_index(
                            c, field, field_schema=qm.PayloadSchemaType.DATETIME, wait=True)
                for field in POSITION_FIELDS:
                    if field not in have:
                        await self._client.create_payload_index(
                            c, field, field_schema=qm.PayloadSchemaType.INTEGER, wait=True)
        self._dim = dim

    async def record_embedder(self, dim: int, embedder: str, variant: str = "") -> None:
        self._check_open()
        with self._errors("record_embedder"):  # metadata updates merge: the re-embed target is cleared explicitly
            await self._client.update_collection(
                self._collection, metadata={**embedder_record(dim, embedder, variant), "reembed_to": None})

    async def recorded_embedder(self) -> dict[str, Any]:
        self._check_open()
        with self._errors("recorded_embedder"):
            info = await self._client.get_collection(self._collection)
        return dict(info.config.metadata or {})

    def _fix_hint(self) -> str:
        return (
            "Mixing embedders would corrupt search: set QDRANT_COLLECTION to another name, or reset the "
            f"vector data (delete collection '{self._collection}') and re-ingest."
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._client.close()

    async def ping(self) -> None:
        self._check_open()
        with self._errors("ping"):
            exists = await self._client.collection_exists(self._collection)
        if not exists:
            raise DependencyUnavailable(f"qdrant collection '{self._collection}' at {self._where} is missing")

    # ---------------------------------------------------------------------------------------
    # writes
    # ---------------------------------------------------------------------------------------

    async def upsert(self, memories: list[Memory], vectors: list[list[float]]) -> None:
        check_upsert(memories, vectors, self._dim, self._collection)
        if not memories:
            return
        points = [qm.PointStruct(id=m.id, vector=_vectors(m, v), payload=payload_of(m))
                  for m, v in zip(memories, vectors, strict=True)]
        self._check_open()
        with self._errors("upsert"):
            await self._client.upsert(self._collection, points=points, wait=True)

    async def update_payload(self, memories: list[Memory]) -> None:
        valid: list[qm.ExtendedPointId] = [i for i in valid_ids([m.id for m in memories])]
        if not valid:
            return
        self._check_open()
        with self._errors("update_payload"):
            found = await self._client.retrieve(self._collection, ids=valid, with_payload=False, with_vectors=False)
        stored = {str(r.id) for r in found}  # a payload alone never makes a point
        ops: list[qm.UpdateOperation] = [
            qm.OverwritePayloadOperation(overwrite_payload=qm.SetPayload(payload=payload_of(m), points=[m.id]))
            for m in memories if m.id in stored]
        if not ops:
            return
        self._check_open()
        with self._errors("update_payload"):
            await self._client.batch_update_points(self._collection, update_operations=ops, wait=True)

    async def delete(self, ids: list[str]) -> None:
        valid: list[qm.ExtendedPointId] = [i for i in valid_ids(ids)]
        if not valid:
            return
        self._check_open()
        with self._errors("delete"):
            await self._client.delete(self._collection, points_selector=qm.PointIdsList(points=valid), wait=True)

    # ---------------------------------------------------------------------------------------
    # reads
    # ---------------------------------------------------------------------------------------

    async def rank(self, requests: list[RankRequest]) -> list[list[tuple[str, float]]]:
        """One `query_batch_points` call (one HTTP round trip) for the lot."""
        built = _queries.build(requests, self._dim, self._collection)
        todo = [q for q in built if q is not None]
        if not todo:
            return [[] for _ in requests]
        self._check_open()
        with self._errors("rank"):
            res = await self._client.query_batch_points(self._collection, requests=todo)
        return ranked(built, (r.points for r in res))

    async def optimize(self) -> bool:
        """Nothing to do: a Qdrant server builds its HNSW in the background, in its own process."""
        return False

    async def index_backlog(self) -> int:
        return 0

    async def get(self, ids: list[str]) -> list[Memory]:
        valid: list[qm.ExtendedPointId] = [i for i in valid_ids(ids)]
        if not valid:
            return []
        self._check_open()
        with self._errors("get"):
            records = await self._client.retrieve(self._collection, ids=valid, with_payload=True, with_vectors=False)
        return visible_memories(memory_of(r.id, r.payload) for r in records)

    async def scroll(self, flt: MemoryFilter, limit: int, cursor: str | None = None,
                     order: ListOrder = ListOrder.ID) -> tuple[list[Memory], str | None]:
        if order is not ListOrder.ID:
            return await page_by_time(_filters, self._by_time, self._by_id, flt, limit, cursor, order)
        records, nxt = await self._scroll(flt, limit, cursor, with_vectors=False)
        return [memory_of(r.id, r.payload) for r in records], nxt

    async def _by_id(self, f: qm.Filter, offset: str | None, limit: int) -> tuple[list[Memory], str | None]:
        self._check_open()
        with self._errors("scroll"):
            records, nxt = await self._client.scroll(self._collection, scroll_filter=f, limit=limit, offset=offset,
                                                     with_payload=True, with_vectors=False)
        return [memory_of(r.id, r.payload) for r in records], (None if nxt is None else str(nxt))

    async def _by_time(self, f: qm.Filter, newest: bool, limit: int) -> list[tuple[Memory, int]]:
        """By created_at (a server needs its datetime index, made by ensure_collection; local mode sorts the
        payloads), each with its order value."""
        direction = qm.Direction.DESC if newest else qm.Direction.ASC
        self._check_open()
        with self._errors("scroll"):
            records, _ = await self._client.scroll(
                self._collection, scroll_filter=f, limit=limit, with_payload=True, with_vectors=False,
                order_by=qm.OrderBy(key=CREATED_FIELD, direction=direction))
        return [(memory_of(r.id, r.payload), int(cast(int, r.order_value))) for r in records]

    async def _scroll(
        self, flt: MemoryFilter, limit: int, cursor: str | None, *, with_vectors: bool
    ) -> tuple[list[qm.Record], str | None]:
        offset = parse_cursor(cursor)
        f = build_filter(flt)
        if f is None or limit <= 0:
            return [], None
        self._check_open()
        with self._errors("scroll"):
            records, nxt = await self._client.scroll(
                self._collection,
                scroll_filter=f,
                limit=limit,
                offset=offset,
                with_payload=True,
                with_vectors=with_vectors,
            )
        return records, (None if nxt is None else str(nxt))

    async def count(self, flt: MemoryFilter | None = None) -> int:
        f: qm.Filter | None = None
        if flt is not None:
            f = build_filter(flt)
            if f is None:
                return 0
        self._check_open()
        with self._errors("count"):
            res = await self._client.count(self._collection, count_filter=f, exact=True)
        return res.count

    async def scroll_vectors(
        self, flt: MemoryFilter, limit: int, cursor: str | None = None
    ) -> tuple[list[VectorRecord], str | None]:
        records, nxt = await self._scroll(flt, limit, cursor, with_vectors=True)
        return [VectorRecord(memory_of(r.id, r.payload), plain_vector(r.vector)) for r in records], nxt

    async def boundaries(self, user_id: str | None = None, limit: int = 100_000) -> list[Boundary]:
        self._check_open()
        c = self._collection
        with self._errors("boundaries"):
            if user_id is not None:
                users = [user_id]
            else:
                res = await self._client.facet(c, key="user_id", limit=limit, exact=True)
                users = sorted(str(h.value) for h in res.hits)
            out: list[Boundary] = []
            for user in users:
                glob = build_filter(MemoryFilter(user, scope=Scope.GLOBAL))
                n_global = (await self._client.count(c, count_filter=glob, exact=True)).count
                if n_global:
                    out.append(Boundary(user, Scope.GLOBAL, None, n_global))
                proj = build_filter(MemoryFilter(user, scope=Scope.PROJECT))
                res = await self._client.facet(c, key="project_id", facet_filter=proj, limit=limit, exact=True)
                out += sorted((Boundary(user, Scope.PROJECT, str(h.value), h.count) for h in res.hits),
                              key=lambda b: b.project_id or "")
        return out

    # ---------------------------------------------------------------------------------------
    # helpers
    # ---------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise DependencyUnavailable(f"qdrant store {self._where} is closed")

    @contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        try:
            yield
        except (ResponseHandlingException, httpx.TransportError, ConnectionError, TimeoutError) as e:
            raise DependencyUnavailable(f"qdrant at {self._where} unreachable during {op}: {e}") from e
        except UnexpectedResponse as e:
            if e.status_code is None or e.status_code >= 500 or e.status_code in _UNAVAILABLE_STATUS:
                raise DependencyUnavailable(
                    f"qdrant at {self._where} failed during {op}: HTTP {e.status_code} {e.reason_phrase}"
                ) from e
            raise


# -------------------------------------------------------------------------------------------
# payload, filters and rank requests in qdrant-client's classes
# -------------------------------------------------------------------------------------------


def _moment(stamp: str | None) -> datetime | None:
    return None if stamp is None else datetime.fromisoformat(stamp)


_filters: FilterBuilder[qm.Condition, qm.Filter] = FilterBuilder(
    eq=lambda key, value: qm.FieldCondition(key=key, match=qm.MatchValue(value=value)),
    any_of=lambda key, values: qm.FieldCondition(key=key, match=qm.MatchAny(any=values)),
    all_of=lambda conds: qm.Filter(must=list(conds)),
    one_of=lambda conds: qm.Filter(should=list(conds)),
    time_range=lambda key, gte, lt: qm.FieldCondition(key=key, range=qm.DatetimeRange(
        gte=_moment(gte), lt=_moment(lt))),
    is_empty=lambda key: qm.IsEmptyCondition(is_empty=qm.PayloadField(key=key)),
)
build_filter = _filters.build
_queries: RankBuilder[qm.Condition, qm.Filter, qm.QueryRequest] = RankBuilder(
    _filters,
    has_ids=lambda valid: qm.HasIdCondition(has_id=cast("list[qm.ExtendedPointId]", valid)),
    both=lambda f, only: qm.Filter(must=[f, only]),
    dense=lambda vector, f, limit: qm.QueryRequest(query=vector, filter=f, limit=limit, with_payload=False),
    sparse=lambda indices, values, f, limit, corpus: qm.QueryRequest(
        query=qm.SparseVector(indices=indices, values=values), using=LEXICAL_VECTOR, filter=f, limit=limit,
        with_payload=False, params=qm.SearchParams(idf=qm.IdfCorpusParams(corpus=corpus))),
)


def _vectors(m: Memory, dense: list[float]) -> dict[str, qm.Vector]:
    out: dict[str, qm.Vector] = {"": list(dense)}
    lexical = lexical_vector(m.content)
    if lexical is not None:
        out[LEXICAL_VECTOR] = qm.SparseVector(indices=lexical[0], values=lexical[1])
    return out
