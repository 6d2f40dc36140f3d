"""Rank fusion of the retrievers' lists (docs/retrieval.md).

Weighted reciprocal rank fusion: a memory's fused score is the sum over the retrievers that returned it of
`weight / (k + rank)` (rank 1 = first). Only ranks count, so a BM25 score of 7 and a cosine of 0.4 need no
common scale; the weights and k are settings (RRF_K, SEARCH_WEIGHT_*), fit on the development data by
`scripts/bench/recall.py --fit`. Ties go to the memory with the better best rank, then to the id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class Fused:
    id: str
    score: float = 0.0
    # retriever -> (rank, the retriever's own score)
    signals: dict[str, tuple[int, float]] = field(default_factory=dict)
    best_rank: int = 0  # the best of the ranks in `signals` (the first tie-break); 0 before the first


def fuse(
    ranked: Mapping[str, Sequence[tuple[str, float]]], weights: Mapping[str, float], k: float
) -> list[Fused]:
    """`ranked` maps a retriever to its (id, score) list, best first; an id listed twice by one retriever
    counts at its first rank. Retrievers with weight 0 still appear in the signals but add nothing."""
    out: dict[str, Fused] = {}
    for retriever, items in ranked.items():
        weight = weights.get(retriever, 0.0)
        rank = 0
        for item_id, score in items:
            fused = out.get(item_id)
            if fused is None:
                fused = out[item_id] = Fused(item_id)
            elif retriever in fused.signals:
                continue
            rank += 1
            fused.signals[retriever] = (rank, score)
            fused.score += weight / (k + rank)
            if not fused.best_rank or rank < fused.best_rank:
                fused.best_rank = rank
    return sorted(out.values(), key=lambda f: (-f.score, f.best_rank, f.id))
