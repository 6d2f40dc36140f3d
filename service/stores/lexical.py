"""BM25 term weights for the lexical retriever, shared by both Qdrant adapters.

Qdrant Edge's own BM25 model (`qdrant_edge.Bm25`, no server or model download) turns a text into a sparse
vector: a document gets term-frequency weights with BM25's length normalisation, a query one weight per
unique term. The collection's sparse vector has the IDF modifier, so Qdrant multiplies in the inverse
document frequency at query time, computed over the caller's own memories (the user filter), never over
other tenants'. English stop words and stemming are the model's defaults. `avg_len` is the typical length of
a memory (a sentence or a turn, ~30 tokens), not the model's default of 256 meant for documents.

An interaction window (`user:` / `assistant:` lines) is indexed by the user's lines only: the assistant's replies
are chatter ("great person to work with", "run a citric acid solution") whose words would match questions about
the user's work or who runs their kitchen. Its dense vector still reads the whole window."""

from __future__ import annotations

import re

import qdrant_edge as qe

AVG_MEMORY_TOKENS = 30.0
_ROLE = re.compile(r"^(user|assistant|system|tool): ?")


def indexed_words(content: str) -> str:
    """The words BM25 indexes for a memory: a window's `user:` lines (labels dropped) when every line carries a
    role, else the whole content."""
    lines = content.splitlines()
    roles = [_ROLE.match(line) for line in lines]
    if not lines or not all(roles):
        return content
    return "\n".join(line[m.end():] for line, m in zip(lines, roles, strict=True) if m and m.group(1) == "user")


class Bm25Encoder:
    def __init__(self) -> None:
        self._model = qe.Bm25(qe.Bm25Config(avg_len=AVG_MEMORY_TOKENS))

    def document(self, text: str) -> tuple[list[int], list[float]]:
        v = self._model.embed_document(text)
        return list(v.indices), list(v.values)

    def query(self, text: str) -> tuple[list[int], list[float]]:
        v = self._model.embed_query(text)
        return list(v.indices), list(v.values)
