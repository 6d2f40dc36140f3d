"""Summaries by Gemini, with structured output `{"summary": "..."}` and the extractor's client and retry rules
(client.py):
- a conversation's summary (`GeminiSummarizer`: the extractor's model, then its fallback model);
- a community's (`GeminiCommunitySummarizer`, service/graph_api/communities.py): one call per community with its
  members and the facts inside it. A failure is the caller's to handle (it keeps the offline summary)."""

from __future__ import annotations

import json

import structlog
from google import genai
from google.genai import types
from pydantic import ValidationError

from service.ai.gemini.client import GeminiResponseError, GeminiUnavailable, backoff, request_with_retries
from service.ai.llm.summaries import (
    COMMUNITY_INSTRUCTION,
    MAX_COMMUNITY_FACTS,
    SUMMARY_INSTRUCTION,
    CommunityAnswer,
    SummaryResponse,
    clip_summary,
    community_prompt,
    conversation_prompt,
)
from service.core.metrics import LLM_TOKENS

log = structlog.get_logger(__name__)

INSTRUCTION = COMMUNITY_INSTRUCTION
MAX_FACTS = MAX_COMMUNITY_FACTS
_Answer = CommunityAnswer


class GeminiCommunitySummarizer:
    name = "gemini"

    def __init__(self, client: genai.Client, model: str, *, timeout_s: float = 60, max_retries: int = 2) -> None:
        self._client = client
        self.model = model
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._backoff = backoff(0.5, 8.0)

    async def summarise(self, members: list[tuple[str, str]], facts: list[str]) -> str:
        """`members`: (name, type), best connected first; `facts`: the sentences of relations inside the group."""
        prompt = community_prompt(members, facts)
        config = types.GenerateContentConfig(
            system_instruction=INSTRUCTION, response_mime_type="application/json", response_schema=_Answer,
            http_options=types.HttpOptions(timeout=max(1, int(self._timeout_s * 1000))))
        response, _, latency_ms = await request_with_retries(
            lambda: self._client.aio.models.generate_content(model=self.model, contents=prompt, config=config),
            model=self.model, max_retries=self._max_retries, backoff=self._backoff, timeout_s=self._timeout_s,
            event="gemini_summary", stage="summary")
        usage = response.usage_metadata
        if usage is not None:
            LLM_TOKENS.labels("summary", self.model, "prompt").inc(usage.prompt_token_count or 0)
            LLM_TOKENS.labels("summary", self.model, "output").inc(usage.candidates_token_count or 0)
        try:
            answer = _Answer.model_validate(json.loads(response.text or ""))
        except (ValueError, ValidationError) as exc:
            raise GeminiResponseError(f"Gemini {self.model}: a community summary that is not "
                                      f"{{\"summary\": ...}}: {str(exc)[:200]}", model=self.model) from exc
        log.info("gemini_summary", model=self.model, latency_ms=latency_ms, members=len(members))
        return answer.summary.strip()


class GeminiSummarizer:
    name = "gemini"

    def __init__(self, client: genai.Client, model: str, fallback_model: str, *, timeout_s: float = 60,
                 max_retries: int = 3, base_delay_s: float = 0.5, max_delay_s: float = 8.0) -> None:
        self._client = client
        self.model = model
        self.fallback_model = fallback_model
        self._timeout_s = timeout_s
        self._max_retries = max(0, max_retries)
        self._backoff = backoff(base_delay_s, max_delay_s)

    @staticmethod
    def prompt(messages: list[tuple[str, str]]) -> str:
        """The conversation as `role: content` lines, the first MAX_INPUT_CHARS characters (service/ai/llm)."""
        return conversation_prompt(messages)

    async def summarise(self, messages: list[tuple[str, str]], max_sentences: int) -> tuple[str, str]:
        """(summary, model that wrote it). The fallback model is asked when the first is unavailable."""
        prompt = self.prompt(messages)
        try:
            return await self._call(self.model, prompt, max_sentences), self.model
        except GeminiUnavailable as exc:
            if self.fallback_model == self.model:
                raise
            log.warning("gemini_summary_fallback", model=self.model, fallback=self.fallback_model, error=str(exc))
            return await self._call(self.fallback_model, prompt, max_sentences), self.fallback_model

    async def _call(self, model: str, prompt: str, max_sentences: int) -> str:
        config = types.GenerateContentConfig(
            system_instruction=SUMMARY_INSTRUCTION.format(sentences=max_sentences),
            response_mime_type="application/json", response_schema=SummaryResponse,
            temperature=None if model.startswith("gemini-3") else 0.0,
            http_options=types.HttpOptions(timeout=max(1, int(self._timeout_s * 1000))))
        response, attempt, latency_ms = await request_with_retries(
            lambda: self._client.aio.models.generate_content(model=model, contents=prompt, config=config),
            model=model, max_retries=self._max_retries, backoff=self._backoff, timeout_s=self._timeout_s,
            event="gemini_summary", stage="summary")
        usage = response.usage_metadata
        if usage is not None:
            LLM_TOKENS.labels("summary", model, "prompt").inc(usage.prompt_token_count or 0)
            LLM_TOKENS.labels("summary", model, "output").inc(usage.candidates_token_count or 0)
        text = response.text or ""
        try:
            summary = SummaryResponse.model_validate(json.loads(text)).summary
        except ValueError as exc:
            raise GeminiResponseError(f"Gemini {model} returned no summary: {text[:120]!r}", model=model) from exc
        log.info("gemini_summary", model=model, attempt=attempt, latency_ms=latency_ms, chars=len(summary))
        return clip_summary(summary)
