"""The dense retriever: nearest memories by cosine of the query's embedding."""

from __future__ import annotations

from service.search.retriever import Query, Retrieved
from service.stores.vector import RankRequest, VectorStore


class Dense:
    name = "dense"
    uses_vector = True
    remote_first = False

    def __init__(self, vectors: VectorStore, weight: float) -> None:
        self.vectors = vectors
        self.weight = weight

    async def retrieve(self, q: Query) -> Retrieved:
        [hits] = await self.vectors.rank([RankRequest(q.flt, q.limit, vector=await q.vector())])
        return Retrieved(hits)
