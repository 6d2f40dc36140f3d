"""One OpenAI-compatible server as the settings describe it (LLM_PROVIDER=openai and/or EMBEDDER=openai): its SDK
client, built once at start (service/deps.py) and closed with the other clients, and the extractor, summarizers and
embedder that share it (one mode book, one LLM_CONCURRENCY bound per process)."""

from __future__ import annotations

from typing import Any

import structlog
from redis.exceptions import RedisError

from service.ai.openai.client import ChatClient, make_client, server_of
from service.ai.openai.embedder import OpenAIEmbedder, check_dimension
from service.ai.openai.extractor import OpenAIExtractor
from service.ai.openai.summaries import OpenAICommunitySummarizer, OpenAISummarizer
from service.core.keys import Keys
from service.core.settings import EmbeddingSettings, LlmSettings

log = structlog.get_logger(__name__)


class OpenAIProvider:
    name = "openai"

    def __init__(self, llm: LlmSettings, embeddings: EmbeddingSettings) -> None:
        self.server = server_of(llm.openai_base_url)
        key = llm.openai_api_key.get_secret_value() if llm.openai_api_key is not None else None
        self.client = make_client(llm.openai_base_url, key, llm.timeout_seconds)
        self.chat = ChatClient(self.client, self.server, timeout_s=llm.timeout_seconds,
                               concurrency=llm.concurrency, max_output_tokens=llm.max_output_tokens)
        self.model = llm.model
        self.fallback_model = llm.fallback_model
        self._llm = llm
        self._embeddings = embeddings
        self._embedder: OpenAIEmbedder | None = None
        self._redis: Any = None
        self._modes_key = ""

    def share_modes(self, redis: Any, prefix: str) -> None:
        """Record each accepted structured-output mode in Redis too (a hash per deployment), so /health in the API
        process says what the worker processes found."""
        self._redis, self._modes_key = redis, Keys(prefix).llm_modes

        async def sink(model: str, mode: str) -> None:
            try:
                await redis.hset(self._modes_key, f"{self.server} {model}", mode)
            except (RedisError, OSError) as exc:  # only what /health shows: the extraction goes on
                log.warning("llm_mode_not_shared", model=model, mode=mode, error=str(exc)[:200])

        self.chat.modes.sink = sink

    async def modes(self) -> dict[str, str]:
        """model -> accepted mode, this process's and those other processes recorded for this server."""
        found: dict[str, str] = {}
        if self._redis is not None:
            try:
                raw = await self._redis.hgetall(self._modes_key)
            except (RedisError, OSError) as exc:
                log.warning("llm_modes_unread", error=str(exc)[:200])
                raw = {}
            for key, value in raw.items():
                key = key.decode() if isinstance(key, bytes) else str(key)
                server, _, model = key.rpartition(" ")
                if server == self.server:
                    found[model] = value.decode() if isinstance(value, bytes) else str(value)
        found.update(self.chat.modes.snapshot())
        return found

    @staticmethod
    def wanted(llm_provider: str, embedder: str) -> bool:
        """Whether LLM_PROVIDER (resolved) or EMBEDDER is openai."""
        return llm_provider == "openai" or embedder == "openai"

    def extractor(self) -> OpenAIExtractor:
        assert self.model is not None  # Settings refuses LLM_PROVIDER=openai without LLM_MODEL
        log.info("openai_provider", server=self.server, model=self.model, fallback_model=self.fallback_model)
        return OpenAIExtractor(self.chat, self.model, self.fallback_model)

    def summarizer(self) -> OpenAISummarizer | None:
        return OpenAISummarizer(self.chat, self.model, self.fallback_model) if self.model else None

    def community_summarizer(self) -> OpenAICommunitySummarizer | None:
        return OpenAICommunitySummarizer(self.chat, self.model) if self.model else None

    def embedder(self) -> OpenAIEmbedder:
        model, dim = self._llm.openai_embedding_model, self._llm.openai_embedding_dim
        assert model is not None and dim is not None
        self._embedder = OpenAIEmbedder(self.client, model, dim,
                                        self._embeddings.batch_size, timeout_s=self._llm.timeout_seconds,
                                        limiter=self.chat.limiter)
        return self._embedder

    async def check(self) -> None:
        """At start: the embedder's dimension against the server's vectors (refused with one line when they
        differ)."""
        if self._embedder is not None:
            await check_dimension(self._embedder, self.server)

    async def aclose(self) -> None:
        await self.client.close()
