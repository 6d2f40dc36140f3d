"""OpenAI-compatible servers (the `openai` SDK): the chat client with our retries and structured-output modes, the
extractor, the summarizers and the embedder (docs/llm.md)."""

from service.ai.openai.client import (
    ChatClient,
    ModeBook,
    OpenAIError,
    OpenAIRequestError,
    OpenAIResponseError,
    OpenAIUnavailable,
    make_client,
)
from service.ai.openai.embedder import EmbeddingDimensionError, OpenAIEmbedder
from service.ai.openai.extractor import OpenAIExtractor
from service.ai.openai.provider import OpenAIProvider

__all__ = ["ChatClient", "EmbeddingDimensionError", "ModeBook", "OpenAIEmbedder", "OpenAIError", "OpenAIExtractor",
           "OpenAIProvider", "OpenAIRequestError", "OpenAIResponseError", "OpenAIUnavailable", "make_client"]
