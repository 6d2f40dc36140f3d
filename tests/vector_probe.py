"""Searches the tests read memories by: the production `rank` (ids and scores) with the memories' payloads read
by `get`, as a search does."""

from __future__ import annotations

from dataclasses import dataclass

from service.core.domain import Memory
from service.stores.vector import MemoryFilter, RankRequest, VectorStore


@dataclass(frozen=True)
class ScoredMemory:
    memory: Memory
    score: float  # cosine similarity in [-1, 1] (dense), BM25 (lexical)


async def _scored(store: VectorStore, request: RankRequest) -> list[ScoredMemory]:
    [hits] = await store.rank([request])
    found = {m.id: m for m in await store.get([mid for mid, _ in hits])}
    return [ScoredMemory(found[mid], score) for mid, score in hits if mid in found]


async def search(store: VectorStore, vector: list[float], flt: MemoryFilter, limit: int) -> list[ScoredMemory]:
    """Dense: nearest by cosine."""
    return await _scored(store, RankRequest(flt, limit, vector=vector))


async def search_text(store: VectorStore, text: str, flt: MemoryFilter, limit: int) -> list[ScoredMemory]:
    """Lexical: BM25 over the memories' content."""
    return await _scored(store, RankRequest(flt, limit, text=text))
