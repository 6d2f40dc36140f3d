"""Conversation summaries and community summaries through an OpenAI-compatible server: the prompts and answer models
every provider shares (service/ai/llm/summaries.py), the chat client's structured-output modes and retries. A
failure is the caller's to handle (it keeps the offline summary)."""

from __future__ import annotations

import structlog
from pydantic import ValidationError

from service.ai.llm.retry import Malformed
from service.ai.llm.summaries import (
    COMMUNITY_INSTRUCTION,
    SUMMARY_INSTRUCTION,
    CommunityAnswer,
    SummaryResponse,
    clip_summary,
    community_prompt,
    conversation_prompt,
)
from service.ai.openai.client import (
    ChatClient,
    OpenAIResponseError,
    OpenAIUnavailable,
    parse_json_answer,
    strict_schema,
)

log = structlog.get_logger(__name__)


class OpenAISummarizer:
    """A conversation's summary by the extractor's model (its fallback model when the first is unavailable)."""

    name = "openai"

    def __init__(self, chat: ChatClient, model: str, fallback_model: str | None = None) -> None:
        self.chat = chat
        self.model = model
        self.fallback_model = fallback_model or None
        self._schema = strict_schema(SummaryResponse)

    async def summarise(self, messages: list[tuple[str, str]], max_sentences: int) -> tuple[str, str]:
        prompt = conversation_prompt(messages)
        try:
            return await self._call(self.model, prompt, max_sentences), self.model
        except OpenAIUnavailable as exc:
            if self.fallback_model is None or self.fallback_model == self.model:
                raise
            log.warning("openai_summary_fallback", model=self.model, fallback=self.fallback_model, error=str(exc))
            return await self._call(self.fallback_model, prompt, max_sentences), self.fallback_model

    async def _call(self, model: str, prompt: str, max_sentences: int) -> str:
        text, _, mode = await self.chat.complete_json(
            model, SUMMARY_INSTRUCTION.format(sentences=max_sentences), [{"role": "user", "content": prompt}],
            "summary", self._schema, stage="summary", event="openai_summary")
        try:
            summary = SummaryResponse.model_validate(parse_json_answer(text)).summary
        except (Malformed, ValidationError) as exc:
            raise OpenAIResponseError(f"LLM {model} returned no summary: {text[:120]!r}", model=model) from exc
        await self.chat.modes.accepted(model, mode)
        return clip_summary(summary)


class OpenAICommunitySummarizer:
    name = "openai"

    def __init__(self, chat: ChatClient, model: str) -> None:
        self.chat = chat
        self.model = model
        self._schema = strict_schema(CommunityAnswer)

    async def summarise(self, members: list[tuple[str, str]], facts: list[str]) -> str:
        """`members`: (name, type), best connected first; `facts`: the sentences of relations inside the group."""
        text, _, mode = await self.chat.complete_json(
            self.model, COMMUNITY_INSTRUCTION, [{"role": "user", "content": community_prompt(members, facts)}],
            "community_summary", self._schema, stage="summary", event="openai_community_summary",
            members=len(members))
        try:
            answer = CommunityAnswer.model_validate(parse_json_answer(text))
        except (Malformed, ValidationError) as exc:
            raise OpenAIResponseError(f"LLM {self.model}: a community summary that is not {{\"summary\": ...}}: "
                                      f"{str(exc)[:200]}", model=self.model) from exc
        await self.chat.modes.accepted(self.model, mode)
        return answer.summary.strip()
