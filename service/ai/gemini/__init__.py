"""Gemini backends (google-genai): the client with our own retries, the LLM extractor, the embedder and
the extraction prompt."""

from service.ai.gemini.client import (
    GeminiError,
    GeminiRequestError,
    GeminiResponseError,
    GeminiUnavailable,
    make_client,
)
from service.ai.gemini.embedder import GeminiEmbedder
from service.ai.gemini.extractor import GeminiExtractor

__all__ = ["GeminiEmbedder", "GeminiError", "GeminiExtractor", "GeminiRequestError", "GeminiResponseError",
           "GeminiUnavailable", "make_client"]
