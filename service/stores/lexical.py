"""BM25 term weights for the lexical retriever, shared by both Qdrant adapters.

Qdrant Edge's own BM25 model (`qdrant_edge.Bm25`, no server or model download) turns a text into a sparse
vector: a document gets term-frequency weights with BM25's length normalisation, a query one weight per
unique term. The collection's sparse vector has the IDF modifier, so Qdrant multiplies in the inverse
document frequency at query time, computed over the caller's own memories (the user filter), never over
other tenants'. English stop words and stemming are the model's defaults. `avg_len` is the typical length of
a memory (a sentence or a turn, ~30 tokens), not the model's default of 256 meant for documents."""

from __future__ import annotations

import qdrant_edge as qe

AVG_MEMORY_TOKENS = 30.0


class Bm25Encoder:
    def __init__(self) -> None:
        self._model = qe.Bm25(qe.Bm25Config(avg_len=AVG_MEMORY_TOKENS))

    def document(self, text: str) -> tuple[list[int], list[float]]:
        v = self._model.embed_document(text)
        return list(v.indices), list(v.values)

    def query(self, text: str) -> tuple[list[int], list[float]]:
        v = self._model.embed_query(text)
        return list(v.indices), list(v.values)
