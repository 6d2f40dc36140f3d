"""The Gemini embedder (batchEmbedContents), vectors L2-normalised here."""

from __future__ import annotations

import structlog
from google import genai
from google.genai import types

from service.ai.embeddings import in_batches, unit_length
from service.ai.gemini.client import GEMINI_MAX_EMBED_BATCH, GeminiResponseError, backoff, request_with_retries

log = structlog.get_logger(__name__)

# --------------------------------------------------------------------------------------------
# Embedder
# --------------------------------------------------------------------------------------------


class GeminiEmbedder:
    """Embedder Protocol over `embed_content` (batchEmbedContents); vectors are L2-normalised here.

    Gemini only normalises its full-size (3072) embeddings; reduced `output_dimensionality`
    vectors are not unit length, and the vector store's cosine/dot scores assume they are.
    """

    def __init__(
        self,
        client: genai.Client,
        model: str,
        dim: int = 768,
        batch_size: int = 64,
        max_retries: int = 3,
        *,
        timeout_s: float = 30,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        task_type: str | None = None,
    ) -> None:
        self._client = client
        self.model = model
        self.dim = dim
        self.name = f"gemini:{model}:{dim}"
        self.variant = ""
        self._batch_size = max(1, min(batch_size, GEMINI_MAX_EMBED_BATCH))
        self._max_retries = max(0, max_retries)
        self._timeout_s = timeout_s
        self._backoff = backoff(base_delay_s, max_delay_s)
        self._config = types.EmbedContentConfig(
            output_dimensionality=dim,
            task_type=task_type,
            http_options=types.HttpOptions(timeout=max(1, int(timeout_s * 1000))),
        )

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await in_batches(texts, self._batch_size, self._embed_batch)

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self._embed_batch([text])
        return vector

    async def embed_symmetric(self, texts: list[str]) -> list[list[float]]:
        """The same vectors as `embed`: one task type for every text, so the vectors of stores written before
        stay comparable (docs/decisions.md, "Text kinds")."""
        return await self.embed(texts)

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        # One Content per text: a bare list of strings can be merged into one multimodal
        # content by newer embedding models (gemini-embedding-2).
        contents: list[types.Content] = [types.Content(parts=[types.Part(text=t)]) for t in texts]
        response, attempt, latency_ms = await request_with_retries(
            lambda: self._client.aio.models.embed_content(model=self.model, contents=contents, config=self._config),
            model=self.model,
            max_retries=self._max_retries,
            backoff=self._backoff,
            timeout_s=self._timeout_s,
            event="gemini_embed",
            stage="embed",
            batch=len(texts),
        )
        vectors = [list(e.values or []) for e in (response.embeddings or [])]
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise GeminiResponseError(
                f"Gemini embeddings ({self.model}): expected {len(texts)} vectors of {self.dim}, "
                f"got {len(vectors)} of {sorted({len(v) for v in vectors})}",
                model=self.model,
            )
        log.debug("gemini_embed", model=self.model, attempt=attempt, batch=len(texts), latency_ms=latency_ms)
        return [unit_length(v) for v in vectors]
