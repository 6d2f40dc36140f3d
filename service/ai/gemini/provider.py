"""Gemini as the settings describe it (LLM_PROVIDER=gemini and/or EMBEDDER=gemini, with GOOGLE_API_KEY): its SDK
client, built once at start (service/deps.py) and closed with the other clients, and the extractor, summarizers and
embedder that share it. The counterpart of service/ai/openai/provider.py, behind one `LlmProvider`
(service/ai/provider.py)."""

from __future__ import annotations

import structlog

from service.ai.gemini.client import make_client
from service.ai.gemini.embedder import GeminiEmbedder
from service.ai.gemini.extractor import GeminiExtractor
from service.ai.gemini.summaries import GeminiCommunitySummarizer, GeminiSummarizer
from service.core.settings import EmbeddingSettings, GeminiSettings

log = structlog.get_logger(__name__)


class GeminiProvider:
    name = "gemini"

    def __init__(self, gemini: GeminiSettings, embeddings: EmbeddingSettings) -> None:
        assert gemini.api_key is not None  # Settings refuses LLM_PROVIDER=gemini or EMBEDDER=gemini without a key
        self._gemini = gemini
        self._embeddings = embeddings
        self.client = make_client(gemini.api_key.get_secret_value(), gemini.base_url, gemini.timeout_seconds)
        self.model = gemini.llm_model
        self.fallback_model = gemini.llm_fallback_model

    @staticmethod
    def wanted(llm_provider: str, embedder: str, has_key: bool) -> bool:
        """Whether Gemini extracts (LLM_PROVIDER resolved to gemini) or embeds (EMBEDDER=gemini), with a key."""
        return has_key and (llm_provider == "gemini" or embedder == "gemini")

    def extractor(self) -> GeminiExtractor:
        log.info("gemini_provider", model=self.model, fallback_model=self.fallback_model)
        return GeminiExtractor(self.client, self.model, self.fallback_model, timeout_s=self._gemini.timeout_seconds)

    def summarizer(self) -> GeminiSummarizer:
        return GeminiSummarizer(self.client, self.model, self.fallback_model, timeout_s=self._gemini.timeout_seconds)

    def community_summarizer(self) -> GeminiCommunitySummarizer:
        return GeminiCommunitySummarizer(self.client, self.model, timeout_s=self._gemini.timeout_seconds)

    def embedder(self) -> GeminiEmbedder:
        return GeminiEmbedder(self.client, self._gemini.embedder_model, dim=self._gemini.embedding_dim,
                              batch_size=self._embeddings.batch_size)

    async def modes(self) -> dict[str, str]:
        """The structured-output mode of each model: Gemini takes a JSON schema."""
        return {self.model: "json_schema"}

    async def check(self) -> None:
        """Nothing to check at start (the embedder's dimension is what it asks for)."""

    async def aclose(self) -> None:
        await self.client.aio.aclose()
