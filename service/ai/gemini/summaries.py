"""Community summaries by Gemini (service/graph_api/communities.py): one call per community with its members and the
facts inside it, answered as JSON `{"summary": "..."}`. A failure is the caller's to handle (it keeps the offline
summary)."""

from __future__ import annotations

import json

import structlog
from google import genai
from google.genai import types
from pydantic import ValidationError

from service.ai.gemini.client import GeminiResponseError, backoff, request_with_retries
from service.ai.llm.summaries import COMMUNITY_INSTRUCTION, MAX_COMMUNITY_FACTS, CommunityAnswer, community_prompt
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
