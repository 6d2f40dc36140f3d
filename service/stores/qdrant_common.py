"""What both Qdrant adapters share: payload mapping, ids, cursors, the embedder and dimension checks, and the
filter rules (MemoryFilter's docstring) and rank requests written once over each client's own classes."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar, cast

from service.core.domain import Memory, Scope
from service.core.errors import DomainError, StoreConfigError
from service.core.sensitivity import DEFAULT, allowed, visible
from service.stores.lexical import Bm25Encoder, indexed_words
from service.stores.vector import TIME_FIELD, MemoryFilter, RankRequest

C = TypeVar("C")  # a condition of one client library
F = TypeVar("F")  # its filter (itself usable as a condition)
Q = TypeVar("Q")  # its query request

BM25 = Bm25Encoder()  # both adapters index and query the same terms with the same weights


def payload_of(m: Memory) -> dict[str, Any]:
    return m.model_dump(mode="json", exclude={"id"})


def memory_of(point_id: object, payload: dict[str, Any] | None) -> Memory:
    return Memory(id=str(point_id), **(payload or {}))


def visible_memories(memories: Iterable[Memory]) -> list[Memory]:
    """Those a read by id may return under the ceiling of the request being served (service/core/sensitivity.py)."""
    return [m for m in memories if visible(m.sensitivity)]


def plain_vector(vector: Any) -> list[float]:
    """The collection's one unnamed dense vector as a list."""
    if isinstance(vector, dict):  # named vectors: this service creates none, but be explicit
        vector = vector.get("", next(iter(vector.values()), None))
    if not isinstance(vector, list) or (vector and not isinstance(vector[0], (int, float))):
        raise StoreConfigError(f"expected one dense vector per point, got {type(vector).__name__}")
    return [float(x) for x in vector]


def lexical_vector(content: str) -> tuple[list[int], list[float]] | None:
    """A memory's BM25 sparse vector (indices, values) over its indexed words (service/stores/lexical.py
    `indexed_words`); None for a memory with no indexable term (only stop words), which then has no lexical
    vector."""
    indices, values = BM25.document(indexed_words(content))
    return (indices, values) if indices else None


def check_dim(vector: list[float], dim: int | None, collection: str) -> None:
    if dim is not None and len(vector) != dim:
        raise StoreConfigError(f"vector has {len(vector)} dimensions, collection '{collection}' expects {dim}")


def check_upsert(memories: list[Memory], vectors: list[list[float]], dim: int | None, collection: str) -> None:
    if len(memories) != len(vectors):
        raise ValueError(f"{len(memories)} memories but {len(vectors)} vectors")
    for v in vectors:
        check_dim(v, dim, collection)


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def valid_ids(ids: list[str]) -> list[str]:
    """Point ids are UUIDs; anything else cannot exist, so it is dropped (get/delete stay lenient). An id already
    in the canonical form (every id this service makes) is kept as it is: the graph retriever's ranking passes up
    to GRAPH_CANDIDATES ids per search, and parsing each with `uuid.UUID` would be a visible share of its latency."""
    out: list[str] = []
    for i in ids:
        if isinstance(i, str) and _CANONICAL_UUID.fullmatch(i):
            out.append(i)
            continue
        try:
            out.append(str(uuid.UUID(i)))
        except (ValueError, TypeError, AttributeError):
            continue
    return list(dict.fromkeys(out))


def ids_condition(cache: dict[tuple[str, ...], C | None], ids: tuple[str, ...],
                  make: Callable[[list[str]], C]) -> C | None:
    """The condition "one of these points" of a ranking among `ids`, built once per id set for a batch of
    requests (the graph retriever's dense and lexical halves share one); None when no id is valid (nothing to
    rank)."""
    if ids not in cache:
        valid = valid_ids(list(ids))
        cache[ids] = make(valid) if valid else None
    return cache[ids]


def parse_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        return str(uuid.UUID(cursor))
    except (ValueError, TypeError, AttributeError) as e:
        raise DomainError(f"invalid cursor '{cursor}'") from e


class FilterBuilder(Generic[C, F]):
    """The client library's constructors; `build` applies MemoryFilter's rules with them."""

    def __init__(
        self,
        eq: Callable[[str, str], C],
        any_of: Callable[[str, list[str]], C],
        all_of: Callable[[Sequence[C]], F],
        one_of: Callable[[Sequence[C]], F],
        time_range: Callable[[str, str | None, str | None], C],
        is_empty: Callable[[str], C],
    ) -> None:
        self.eq, self.any_of, self.all_of, self.one_of = eq, any_of, all_of, one_of
        self.time_range = time_range  # (key, gte, lt)
        self.is_empty = is_empty  # the field is missing, null or []

    def tenant(self, user_id: str) -> F:
        """All of one user's memories (the IDF corpus of the lexical retriever)."""
        return self.all_of([self.eq("user_id", user_id)])

    def build(self, flt: MemoryFilter) -> F | None:
        """The filter for `flt`; None when nothing can match."""
        eq = self.eq
        must: list[C] = [eq("user_id", flt.user_id)]
        if flt.scope is None:
            if flt.project_id is not None:
                project = cast(C, self.all_of([eq("scope", Scope.PROJECT.value), eq("project_id", flt.project_id)]))
                must.append(cast(C, self.one_of([eq("scope", Scope.GLOBAL.value), project])))
            elif not flt.all_scopes:
                must.append(eq("scope", Scope.GLOBAL.value))
        elif flt.scope is Scope.GLOBAL:
            must.append(eq("scope", Scope.GLOBAL.value))
        else:
            must.append(eq("scope", Scope.PROJECT.value))
            if flt.project_id is not None:
                must.append(eq("project_id", flt.project_id))
        if flt.categories is not None:
            if not flt.categories:
                return None
            must.append(self.any_of("category", list(flt.categories)))
        if flt.agent_id is not None:
            must.append(eq("agent_id", flt.agent_id))
        if flt.after is not None or flt.before is not None:
            must.append(self.time_range(TIME_FIELD, flt.after, flt.before))
        if flt.active_only:  # memories written before the field existed pass: no backfill
            must.append(self.is_empty("superseded_by"))
        tiers = allowed(flt.max_sensitivity)
        if tiers is not None:  # below the ceiling; a memory written before tiers has none and is `internal`
            tier = self.any_of("sensitivity", [t.value for t in tiers])
            must.append(cast(C, self.one_of([tier, self.is_empty("sensitivity")])) if DEFAULT in tiers else tier)
        return self.all_of(must)


class RankBuilder(Generic[C, F, Q]):
    """`VectorStore.rank` requests as the client library's query requests, for one batch call."""

    def __init__(
        self,
        filters: FilterBuilder[C, F],
        has_ids: Callable[[list[str]], C],
        both: Callable[[F, C], F],
        dense: Callable[[list[float], F, int], Q],
        sparse: Callable[[list[int], list[float], F, int, F], Q],
    ) -> None:
        self.filters = filters
        self.has_ids = has_ids  # "one of these points"
        self.both = both  # a filter and a condition
        self.dense = dense  # (vector, filter, limit)
        self.sparse = sparse  # (indices, values, filter, limit, the IDF corpus's filter)

    def build(self, requests: list[RankRequest], dim: int | None, collection: str) -> list[Q | None]:
        """One query per request; None where a request cannot match (no category, no valid id, only stop words),
        which then answers [] without a store call."""
        by_ids: dict[tuple[str, ...], C | None] = {}  # one condition per id set
        return [self._one(r, by_ids, dim, collection) for r in requests]

    def _one(self, r: RankRequest, by_ids: dict[tuple[str, ...], C | None], dim: int | None,
             collection: str) -> Q | None:
        f = self.filters.build(r.flt)
        if f is None or r.limit <= 0:
            return None
        if r.ids is not None:  # only among these memories
            only = ids_condition(by_ids, r.ids, self.has_ids)
            if only is None:
                return None
            f = self.both(f, only)
        if r.vector is not None:
            check_dim(r.vector, dim, collection)
            return self.dense(list(r.vector), f, r.limit)
        indices, values = BM25.query(r.text or "")
        if not indices:
            return None
        return self.sparse(indices, values, f, r.limit, self.filters.tenant(r.flt.user_id))  # IDF: the user's own


def ranked(built: Sequence[object | None], answers: Iterable[Iterable[Any]]) -> list[list[tuple[str, float]]]:
    """Each request's (id, score) list from the batch's answers (one per query that was sent)."""
    it = iter(answers)
    return [[] if q is None else [(str(p.id), float(p.score)) for p in next(it)] for q in built]


# ---- which embedder wrote the collection ---------------------------------------------------------------------

EMBEDDER_KEYS = ("embedder", "dim", "variant", "reembed_to")


def embedder_record(dim: int, embedder: str, variant: str) -> dict[str, Any]:
    """What a collection records of the embedder that wrote it (Edge: its sidecar file; a server: its metadata)."""
    return {"embedder": embedder, "dim": dim, "variant": variant}


def check_embedder(recorded: dict[str, Any] | None, dim: int, embedder: str, variant: str, *,
                   compatible: frozenset[str], allow_change: bool, where: str) -> dict[str, Any] | None:
    """The configured embedder against the one `recorded` for the collection at `where`.

    Returns the record to write (None: leave it as it is). Variants of one model declared compatible (`compatible`)
    share a collection; a record without a variant predates variants and takes the configured one. Another model of
    the same dimension is refused unless `allow_change` (ALLOW_EMBEDDER_CHANGE): then the record names it as the
    target of a re-embed (`reembed_to`) until `python -m service reembed` ends; a different dimension is refused."""
    if recorded is None or not recorded.get("embedder"):
        return embedder_record(dim, embedder, variant)
    r_model, r_dim, r_variant = str(recorded["embedder"]), int(recorded.get("dim") or 0), str(
        recorded.get("variant") or "")
    described = f"embedder '{r_model}' (dim {r_dim}{f', {r_variant}' if r_variant else ''})"
    configured = f"'{embedder}' (dim {dim}{f', {variant}' if variant else ''})"
    if r_dim != dim:
        raise StoreConfigError(
            f"vector collection {where} holds vectors of {described}, but the service is configured with embedder "
            f"{configured}. Vectors of another dimension cannot share it: set QDRANT_COLLECTION to a new name "
            "and move the memories with `python -m service export` (old settings) and `import` (new ones), which "
            "re-embeds them; or set the embedder back.")
    same_model = r_model == embedder and (not r_variant or r_variant == variant or {r_variant, variant} <= compatible)
    if same_model:
        return embedder_record(dim, embedder, variant) if r_variant != variant else None
    target = recorded.get("reembed_to") or {}
    if target.get("embedder") == embedder and str(target.get("variant") or "") == variant:
        return None  # a re-embed to this embedder was allowed and has not finished
    if allow_change:
        return {**recorded, "reembed_to": {"embedder": embedder, "variant": variant}}
    raise StoreConfigError(
        f"vector collection {where} holds vectors of {described}, but the service is configured with embedder "
        f"{configured}; mixing them would corrupt search. To re-embed every memory with the new one, start "
        "once with ALLOW_EMBEDDER_CHANGE=true and run `python -m service reembed` (search keeps working "
        "meanwhile); or set the embedder back.")
