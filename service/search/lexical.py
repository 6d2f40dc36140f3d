"""The lexical retriever: BM25 of the query's words over the user's memories (the store's sparse vectors), the query
widened by the words people use for the same slot (service/text/slots.py: "CI" finds "pipeline")."""

from __future__ import annotations

from service.search.retriever import Query, Retrieved
from service.stores.vector import RankRequest, VectorStore
from service.text.slots import widened


class Lexical:
    name = "lexical"
    uses_vector = False
    remote_first = False

    def __init__(self, vectors: VectorStore, weight: float) -> None:
        self.vectors = vectors
        self.weight = weight

    async def retrieve(self, q: Query) -> Retrieved:
        [hits] = await self.vectors.rank([RankRequest(q.flt, q.limit, text=widened(q.text))])
        return Retrieved(hits)
