"""Result assembly: the fused ids with their memories, as the API answers them."""

from __future__ import annotations

from service.domain import Memory
from service.schemas import SearchResult, Signal
from service.search.fusion import Fused
from service.stores.vector import VectorStore


def memory_result(m: Memory, score: float, signals: dict[str, tuple[int, float]]) -> SearchResult:
    """A fused search hit: the memory, its fused score and each retriever's rank and own score."""
    return SearchResult(
        id=m.id, content=m.content, score=round(score, 6), source="vector", category=m.category, scope=m.scope,
        project_id=m.project_id, created_at=m.created_at, agent_id=m.agent_id, metadata=m.metadata,
        occurred_at=m.occurred_at or m.created_at, source_message_ids=m.source_message_ids,
        signals=[Signal(retriever=name, rank=rank, score=round(own, 6))  # type: ignore[arg-type]
                 for name, (rank, own) in sorted(signals.items(), key=lambda kv: kv[1][0])],
    )


async def results(vectors: VectorStore, fused: list[Fused], limit: int) -> list[SearchResult]:
    """The first `limit` fused hits with their memories: the retrievers rank ids only, so only these payloads are
    read. A memory deleted since it was ranked is skipped and the next one taken."""
    out: list[SearchResult] = []
    start = 0
    for _ in range(3):  # bounded: deletes racing a search are rare
        want = fused[start : start + limit - len(out)]
        if not want:
            break
        found = {m.id: m for m in await vectors.get([f.id for f in want])}
        out += [memory_result(found[f.id], f.score, f.signals) for f in want if f.id in found]
        start += len(want)
        if len(out) >= limit:
            break
    return out
