"""One LLM provider as the settings describe it: Gemini (service/ai/gemini/provider.py) or an OpenAI-compatible
server (service/ai/openai/provider.py). Its client is built once at start and closed with the others; the
extractor, the summarizers and the embedder it makes share that client."""

from __future__ import annotations

from typing import Any, Protocol

from service.ai.embeddings import Embedder
from service.ai.extraction import Extractor


class LlmProvider(Protocol):
    name: str

    def extractor(self) -> Extractor: ...

    def summarizer(self) -> Any:
        """A conversation's summarizer (service/conversations/summary.py `SessionSummarizer`), or None."""

    def community_summarizer(self) -> Any:
        """A community's summarizer (service/graph_api/communities.py `CommunitySummarizer`), or None."""

    def embedder(self) -> Embedder: ...

    async def modes(self) -> dict[str, str]:
        """model -> the structured-output mode it accepts (/health)."""

    async def check(self) -> None:
        """At start: refuse a configuration the server contradicts (an embedding dimension)."""

    async def aclose(self) -> None: ...
