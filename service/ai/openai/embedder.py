"""Embeddings from an OpenAI-compatible server (`/v1/embeddings`), L2-normalised here, each checked against
OPENAI_EMBEDDING_DIM: a server whose vectors have another dimension is refused at start (`check_dimension`)."""

from __future__ import annotations

import asyncio

import openai
import structlog
from openai import AsyncOpenAI, Omit, omit

from service.ai.embeddings import in_batches, unit_length
from service.ai.openai.client import OpenAIResponseError, OpenAIUnavailable, backoff, request_with_retries
from service.core.errors import ConfigError

log = structlog.get_logger(__name__)

MAX_EMBED_BATCH = 256


class EmbeddingDimensionError(ConfigError):
    """The server's vectors do not have the configured dimension."""


class OpenAIEmbedder:
    """Embedder Protocol over `embeddings.create`. OpenAI's text-embedding-3 models are asked for `dim`
    dimensions; any other model must answer `dim` of its own."""

    def __init__(self, client: AsyncOpenAI, model: str, dim: int, batch_size: int = 64, max_retries: int = 3, *,
                 timeout_s: float = 30, base_delay_s: float = 0.5, max_delay_s: float = 8.0,
                 limiter: asyncio.Semaphore | None = None) -> None:
        self._client = client
        self.model = model
        self.dim = dim
        self.name = f"openai:{model}:{dim}"
        self.variant = ""
        self._batch_size = max(1, min(batch_size, MAX_EMBED_BATCH))
        self._max_retries = max(0, max_retries)
        self._timeout_s = timeout_s
        self._backoff = backoff(base_delay_s, max_delay_s)
        self._limiter = limiter
        self._reduce = model.startswith("text-embedding-3")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await in_batches(texts, self._batch_size, self._embed_batch)

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._embed_batch([text])
        return vector

    async def embed_symmetric(self, texts: list[str]) -> list[list[float]]:
        return await self.embed(texts)

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        dimensions: int | Omit = self.dim if self._reduce else omit
        response, attempt, latency_ms = await request_with_retries(
            lambda: self._client.embeddings.create(model=self.model, input=texts, dimensions=dimensions,
                                                   encoding_format="float"),
            model=self.model, max_retries=self._max_retries, backoff=self._backoff,
            timeout_s=self._timeout_s, event="openai_embed", stage="embed", limiter=self._limiter, batch=len(texts))
        data = sorted(response.data, key=lambda d: d.index)
        vectors = [list(d.embedding) for d in data]
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise OpenAIResponseError(
                f"embeddings ({self.model}): expected {len(texts)} vectors of {self.dim}, "
                f"got {len(vectors)} of {sorted({len(v) for v in vectors})}", model=self.model)
        log.debug("openai_embed", model=self.model, attempt=attempt, batch=len(texts), latency_ms=latency_ms)
        return [unit_length(v) for v in vectors]


async def check_dimension(embedder: OpenAIEmbedder, server: str) -> None:
    """At start: one probe text; a vector of another dimension than OPENAI_EMBEDDING_DIM refuses the start with one
    line. A server that cannot be reached now is logged and checked again by every embedding call."""
    try:
        response = await embedder._client.embeddings.create(
            model=embedder.model, input=["dimension check"], dimensions=embedder.dim if embedder._reduce else omit,
            encoding_format="float")
    except (openai.OpenAIError, TimeoutError) as exc:  # down now: logged; every embedding call checks again
        log.warning("openai_embedding_dimension_unchecked", server=server, model=embedder.model,
                    error=str(exc)[:300])
        return
    got = len(response.data[0].embedding) if response.data else 0
    if got != embedder.dim:
        raise EmbeddingDimensionError(
            f"OPENAI_EMBEDDING_DIM is {embedder.dim}, but {embedder.model} at {server} returns vectors of {got} "
            f"dimensions: set OPENAI_EMBEDDING_DIM={got}")



__all__ = ["EmbeddingDimensionError", "OpenAIEmbedder", "OpenAIUnavailable", "check_dimension"]
