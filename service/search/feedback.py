"""Pseudo-relevance feedback (an experiment, off by default: SEARCH_FEEDBACK_WEIGHT 0; docs/retrieval.md
"Multi-hop and open-domain"): after the first fusion, BM25 of the query plus the text of its FEEDBACK_DOCS best
memories, as one more ranked list fused beside the others. Evidence spread over several turns often shares
words with the first turn found (the activity, the place, the person's other name) that the question does not
say."""

from __future__ import annotations

from service.search.fusion import Fused
from service.search.retriever import Query, Ranked
from service.stores.vector import RankRequest, VectorStore

FEEDBACK_DOCS = 3
FEEDBACK_CHARS = 2000  # the expanded query's length bound


async def feedback(vectors: VectorStore, fused: list[Fused], q: Query) -> Ranked:
    """The expanded query's BM25 list (empty when the first pass found nothing)."""
    top = [f.id for f in fused[:FEEDBACK_DOCS]]
    if not top:
        return []
    found = {m.id: m.content for m in await vectors.get(top)}
    text = " ".join([q.text, *(found[mid] for mid in top if mid in found)])[:FEEDBACK_CHARS]
    [hits] = await vectors.rank([RankRequest(q.flt, q.limit, text=text)])
    return hits
