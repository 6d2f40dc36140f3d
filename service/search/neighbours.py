"""Neighbouring turns (SEARCH_NEIGHBOUR_WEIGHT; docs/retrieval.md "Neighbouring turns"): after the first fusion,
the memories that came from the messages next to those of its NEIGHBOUR_SEEDS best memories, in the same
conversation write or raw-write thread (`Memory.source_write`, `source_first`, `source_last`), ranked among
themselves by the query, as one more list fused beside the others. A message found is often the answer to the
message before it, or is answered by the one after it, and evidence spread over several turns is often in
adjacent ones: the neighbour need not share a word with the question. A raw write has neighbours only when it
names its `thread_id` and `position` (a transcript written message by message); other raw writes carry no
order."""

from __future__ import annotations

from service.search.fusion import Fused
from service.search.retriever import Query, Ranked
from service.stores.vector import RankRequest, Span, VectorStore

NEIGHBOUR_SEEDS = 5


async def neighbours(vectors: VectorStore, fused: list[Fused], q: Query) -> Ranked:
    """The seeds' neighbours by cosine to the query, the seeds left out (empty when no seed came from a
    conversation write or a thread). Two store calls: the seeds' payloads, then one ranking among all their
    neighbours."""
    seeds = [f.id for f in fused[:NEIGHBOUR_SEEDS]]
    if not seeds:
        return []
    spans = tuple(Span(m.source_write, m.source_first, m.source_last) for m in await vectors.get(seeds)
                  if m.source_write is not None and m.source_first is not None and m.source_last is not None)
    if not spans:
        return []
    [hits] = await vectors.rank([RankRequest(q.flt, q.limit + len(seeds), vector=await q.vector(), near=spans)])
    taken = set(seeds)
    return [(mid, score) for mid, score in hits if mid not in taken][: q.limit]
