"""Vector store Protocol. Backends: `qdrant_edge` (embedded, default) and `qdrant_server` (qdrant-client).

The rest of the code sees only this Protocol. All Qdrant calls live in the backend modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from service.core.domain import ListOrder, Memory, Scope, utc
from service.core.sensitivity import Sensitivity, current, visible

# Payload fields that get an index (docs/architecture.md, "Data model"). user_id is the tenant key.
# Keyword payload indexes. Every field a filter conditions on needs one: a condition on a field without an index reads
# each candidate point's payload (`superseded_by`, which every search's `active_only` tests with is_empty, cost
# 12 ms of a 10k-point filtered query without its index and 1 ms with it; docs/benchmarks.md).
INDEXED_FIELDS = ("user_id", "scope", "project_id", "category", "hash", "agent_id", "sensitivity", "superseded_by",
                  "source_write")
# Integer payload indexes: a memory's place in its conversation write (kept in the layout of existing shards; no
# search conditions on them since the neighbouring-turns pass left the service: docs/decisions.md).
POSITION_FIELDS = ("source_first", "source_last")
TIME_FIELD = "occurred_at"  # datetime payload index
CREATED_FIELD = "created_at"  # datetime payload index: listings by created_at order by it (Qdrant orders by an index)
LEXICAL_VECTOR = "bm25"  # the sparse vector beside the unnamed dense one


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories an operation may see. `user_id` is always a boundary.

    Scope rule for reads: `project_id` given -> the user's global memories and that project's;
    `project_id` None -> only global, unless `scope` narrows it explicitly or `all_scopes` is set
    (then every memory of the user: global and every project).
    `scope` set -> only that scope (with `project_id` for project scope; project scope without a
    project_id means every project of the user).
    """

    user_id: str
    project_id: str | None = None
    scope: Scope | None = None
    categories: tuple[str, ...] | None = None
    agent_id: str | None = None
    all_scopes: bool = False
    # occurred_at window, stored form (domain.iso): after <= occurred_at < before
    after: str | None = None
    before: str | None = None
    # only memories nothing superseded (a newer preference of the same slot, service/memory/preferences.py):
    # listings, search and the context set it; reconcile, export, dedup and deletes see every memory
    active_only: bool = False
    # The highest sensitivity tier it matches (None: every tier). Its default is the ceiling of the request
    # being served (service/core/sensitivity.py), so every read made for a caller inherits the caller's ceiling.
    max_sensitivity: Sensitivity | None = field(default_factory=current)

    def matches(self, m: Memory) -> bool:
        """The rules above applied to one memory in Python, as the stores apply them in their filters."""
        user_id, scope, project_id, category, agent_id, occurred_at = (
            m.user_id, m.scope, m.project_id, m.category, m.agent_id, m.occurred_at)
        if user_id != self.user_id or not visible(m.sensitivity, self.max_sensitivity):
            return False
        if self.scope is None:
            ok = scope is Scope.GLOBAL or self.all_scopes or (
                self.project_id is not None and scope is Scope.PROJECT and project_id == self.project_id)
        elif self.scope is Scope.GLOBAL:
            ok = scope is Scope.GLOBAL
        else:
            ok = scope is Scope.PROJECT and (self.project_id is None or project_id == self.project_id)
        if not ok or (self.categories is not None and category not in self.categories):
            return False
        if self.agent_id is not None and agent_id != self.agent_id:
            return False
        if self.active_only and m.superseded_by:
            return False
        if self.after is None and self.before is None:
            return True
        when = utc(datetime.fromisoformat(occurred_at)) if isinstance(occurred_at, str) and occurred_at else None
        return when is not None and (self.after is None or when >= utc(datetime.fromisoformat(self.after))) and (
            self.before is None or when < utc(datetime.fromisoformat(self.before)))


@dataclass(frozen=True)
class RankRequest:
    """One retriever's query for `VectorStore.rank`: dense when `vector` is set, lexical (BM25) when `text` is.
    `ids` set: only among these memories (the graph retriever's candidates, ranked by the query); an empty
    tuple matches nothing."""

    flt: MemoryFilter
    limit: int
    vector: list[float] | None = None
    text: str | None = None
    ids: tuple[str, ...] | None = None


@dataclass(frozen=True)
class VectorRecord:
    """A memory with its stored vector (unit length in a cosine collection)."""

    memory: Memory
    vector: list[float]


@dataclass(frozen=True)
class Boundary:
    """A dedup boundary: one user's global scope, or one project of that user. `count` is the number of
    memories in it when it was listed."""

    user_id: str
    scope: Scope
    project_id: str | None
    count: int = 0

    def filter(self) -> MemoryFilter:
        # superseded preferences are history, not duplicates: a sweep could otherwise keep one over the
        # active preference it resembles ("50 dollars" / "80 dollars"), whose id may sort first
        return MemoryFilter(user_id=self.user_id, scope=self.scope, project_id=self.project_id, active_only=True)


class VectorStore(Protocol):
    name: str

    async def ensure_collection(self, dim: int, embedder: str, variant: str = "",
                                compatible: frozenset[str] = frozenset(), allow_change: bool = False) -> None:
        """Create the collection and payload indexes if missing (idempotent), and record the embedder (model id,
        dimension, variant) that writes it.

        Raises StoreConfigError when the collection holds vectors of another dimension, or of another model or a
        variant not in `compatible`, unless `allow_change` (then a re-embed to this embedder is recorded as under
        way: qdrant_common.check_embedder).
        """

    async def record_embedder(self, dim: int, embedder: str, variant: str = "") -> None:
        """Every vector now comes from this embedder (the end of a re-embed)."""

    async def recorded_embedder(self) -> dict[str, Any]:
        """What the collection records of its embedder: `embedder`, `dim`, `variant`, `reembed_to`."""

    async def upsert(self, memories: list[Memory], vectors: list[list[float]]) -> None: ...

    async def update_payload(self, memories: list[Memory]) -> None:
        """Stored memories' payloads replaced by these (the same ids and content: a field such as `superseded_by`
        changed), their dense and lexical vectors kept: nothing is embedded again. Ids not stored are skipped."""

    async def rank(self, requests: list[RankRequest]) -> list[list[tuple[str, float]]]:
        """Each request's (memory id, score) list, best first: by cosine for a dense request, by BM25 (IDF over
        the user's memories) for a lexical one. Ids only: a search reads the payloads of the results it returns,
        with `get`. One store call for the whole batch."""

    async def optimize(self) -> bool:
        """Build the vector indexes now (HNSW); True when anything changed. docs/decisions.md says where
        each backend runs it."""

    async def index_backlog(self) -> int:
        """Points written or deleted since the last index build (0 where the backend indexes and vacuums by
        itself)."""

    async def get(self, ids: list[str]) -> list[Memory]:
        """The memories with these ids that exist, in no particular order."""

    async def delete(self, ids: list[str]) -> None: ...

    async def scroll(
        self, flt: MemoryFilter, limit: int, cursor: str | None = None, order: ListOrder = ListOrder.ID
    ) -> tuple[list[Memory], str | None]:
        """One page of memories matching `flt`, in `order`: by id, or by created_at (newest or oldest first, equal
        created_at by id: service/stores/time_order.py); returns (page, next_cursor). A cursor belongs to the order
        that made it (another order's is a DomainError). A walk of pages returns every memory that existed when it
        began exactly once."""

    async def count(self, flt: MemoryFilter | None = None) -> int: ...

    async def scroll_vectors(
        self, flt: MemoryFilter, limit: int, cursor: str | None = None
    ) -> tuple[list[VectorRecord], str | None]:
        """Like `scroll`, with each memory's stored vector (the dedup sweep's reads)."""

    async def boundaries(self, user_id: str | None = None, limit: int = 100_000) -> list[Boundary]:
        """The distinct (user, scope, project) boundaries that hold memories, with their sizes: every
        user's, or one user's. At most `limit` users, and `limit` projects per user."""

    async def ping(self) -> None:
        """Raise if the store cannot serve requests."""

    async def close(self) -> None: ...
