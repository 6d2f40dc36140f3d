"""The Embedder Protocol, and BatchingEmbedder, which coalesces concurrent calls for any embedder.
Backends: service/ai/local.py (e5-small-v2, the default, or all-MiniLM-L6-v2), service/ai/hashing.py (tests),
service/ai/gemini/embedder.py. Blocking model work runs off the event loop.

Three kinds of text: what is stored (`embed`: memories, windows, facts, messages, runs), what searches
(`embed_query`) and what is compared with its own kind (`embed_symmetric`: entity names in the resolution gate).
A model trained with prefixes (e5: "passage: ", "query: ") gets the right one for each."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)



def unit_length(vector: list[float]) -> list[float]:
    """A vector scaled to length 1 (a zero vector as it is): remote models (Gemini at reduced dimensions, many
    OpenAI-compatible servers) do not always normalise, and the vector store's cosine/dot scores assume it."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:
        return [float(x) for x in vector]
    return [float(x) / norm for x in vector]


async def in_batches(texts: list[str], size: int,
                     embed_batch: Callable[[list[str]], Awaitable[list[list[float]]]]) -> list[list[float]]:
    """A remote embedder's `embed`: the texts in requests of at most `size`, one after another, in order."""
    out: list[list[float]] = []
    for start in range(0, len(texts), size):
        out.extend(await embed_batch(texts[start : start + size]))
    return out


class Embedder(Protocol):
    name: str  # the model id the stores record (with dim and variant): vectors of two models never mix
    dim: int
    variant: str  # how this model is run (e.g. onnx-fp32); "" when there is one way

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per stored text (a passage), in order."""

    async def embed_query(self, text: str) -> list[float]:
        """A search query's vector, computed at once: no batching wait, and the backend's cheapest path for one
        short text."""

    async def embed_symmetric(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts compared with each other rather than searched (entity names), in order."""



class BatchingEmbedder:
    """Coalesces concurrent `embed` calls into one batch for the wrapped embedder.

    Worker jobs run concurrently and each embeds a few texts; one model call for all of them
    costs a fraction of one call each (figures: docs/benchmarks.md). Calls that arrive while a batch runs form
    the next batch.
    """

    def __init__(self, inner: Embedder, max_batch: int = 64, max_wait_s: float = 0.002) -> None:
        self.inner = inner
        self.name = inner.name
        self.variant = inner.variant
        self.dim = inner.dim
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._pending: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) >= self._max_batch:
            return await self.inner.embed(texts)
        future: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._pending.append((texts, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def embed_query(self, text: str) -> list[float]:
        """Not batched: a search waits for nobody (max_wait_s would be added to its latency); the inner embedder
        still serialises model calls (the local model's lock)."""
        return await self.inner.embed_query(text)

    async def embed_symmetric(self, texts: list[str]) -> list[list[float]]:
        """Not batched: a few names per write, most of them cached by the caller (service/identity/rules.py)."""
        return await self.inner.embed_symmetric(texts)

    async def _flush(self) -> None:
        await asyncio.sleep(self._max_wait_s)
        while self._pending:
            batch: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
            size = 0
            while self._pending and (not batch or size + len(self._pending[0][0]) <= self._max_batch):
                item = self._pending.pop(0)
                batch.append(item)
                size += len(item[0])
            texts = [t for item_texts, _ in batch for t in item_texts]
            try:
                vectors = await self.inner.embed(texts)
            except Exception as exc:  # handed to every waiting caller, not swallowed
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for item_texts, future in batch:
                if not future.done():
                    future.set_result(vectors[start : start + len(item_texts)])
                start += len(item_texts)

