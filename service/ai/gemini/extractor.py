"""The Gemini LLM extractor: structured output, retries, the fallback model, windows of long conversations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import structlog
from google import genai
from google.genai import types

from service.ai.extraction import (
    ExtractedFact,
    ExtractionResult,
    KnownMemory,
    Message,
    TokenUsage,
)
from service.ai.gemini.client import (
    FALLBACK_CODES,
    MODEL_NOT_FOUND,
    GeminiError,
    GeminiRequestError,
    GeminiResponseError,
    GeminiUnavailable,
    backoff,
    request_with_retries,
)
from service.ai.llm.prompts import RESPONSE_SCHEMA, SYSTEM_INSTRUCTION, labels, render_conversation
from service.ai.llm.retry import Malformed
from service.ai.llm.validation import resolve_replaces, validate_item, windows
from service.core.domain import normalise
from service.core.metrics import LLM_TOKENS

log = structlog.get_logger(__name__)

# --------------------------------------------------------------------------------------------
# Extractor
# --------------------------------------------------------------------------------------------

class GeminiExtractor:
    """Conversation -> facts with Gemini structured output, retries, fallback model and windowing."""

    name = "gemini"

    def __init__(
        self,
        client: genai.Client,
        model: str,
        fallback_model: str,
        *,
        timeout_s: float = 60,
        max_retries: int = 3,
        window_chars: int = 24_000,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        temperature: float | None = None,
    ) -> None:
        """`max_retries`: retries after the first attempt, per model (so 1 + max_retries attempts).

        `temperature`: None = 0.0 for Gemini 2.x models and the API default (1.0) for Gemini 3,
        which Google advises not to lower (looping, degraded reasoning).
        """
        if window_chars < 200:
            raise ValueError("window_chars must be at least 200")
        self._client = client
        self.model = model
        self.fallback_model = fallback_model
        self._timeout_s = timeout_s
        self._max_retries = max(0, max_retries)
        self._window_chars = window_chars
        self._backoff = backoff(base_delay_s, max_delay_s)
        self._temperature = temperature

    # --- public -------------------------------------------------------------------------

    names_replacements = True

    async def extract(self, messages: list[Message], project_id: str | None = None,
                      known: Sequence[KnownMemory] = ()) -> ExtractionResult:
        """`known`: the user's stored memories this conversation may change; each fact names those it replaces."""
        windows = self.windows(messages)
        usage = TokenUsage()
        facts: list[ExtractedFact] = []
        seen: dict[tuple[str, str], ExtractedFact] = {}
        dropped = 0
        model = self.model
        for number, (start, window) in enumerate(windows):
            prompt = render_conversation(window, project_id, start_index=start, max_message_chars=self._window_chars,
                                         known=known)
            items, window_usage, model = await self._call_with_fallback(model, prompt, number)
            usage = usage.add(window_usage)
            for item in items:
                fact, bad = self._validate(item, project_id, model, range(start, start + len(window)))
                dropped += bad
                if fact is None:
                    continue
                key = (normalise(fact.content), fact.category)
                first = seen.get(key)
                if first is None:
                    seen[key] = fact
                    facts.append(fact)
                else:  # the same fact from another window: it came from those messages too
                    first.source_messages[:] = sorted({*first.source_messages, *fact.source_messages})
        resolve_replaces(facts, labels(known), provider="gemini", model=model)
        log.info(
            "gemini_extracted",
            model=model,
            windows=len(windows),
            facts=len(facts),
            dropped=dropped,
            prompt_tokens=usage.prompt_tokens,
            output_tokens=usage.output_tokens,
            calls=usage.calls,
        )
        return ExtractionResult(facts=facts, extractor=model, usage=usage, dropped=dropped)

    def windows(self, messages: Sequence[Message]) -> list[tuple[int, list[Message]]]:
        """Whole messages packed into windows of at most `window_chars` rendered characters
        (service/ai/llm/validation.py)."""
        return windows(messages, self._window_chars)

    # --- calls --------------------------------------------------------------------------

    async def _call_with_fallback(self, model: str, prompt: str, window: int) -> tuple[list[Any], TokenUsage, str]:
        try:
            items, usage = await self._call_model(model, prompt, window)
            return items, usage, model
        except GeminiError as exc:
            can_fall_back = (
                model != self.fallback_model
                and bool(self.fallback_model)
                and (
                    (isinstance(exc, GeminiUnavailable) and exc.code in FALLBACK_CODES)
                    or (isinstance(exc, GeminiRequestError) and exc.code == MODEL_NOT_FOUND)
                )
            )
            if not can_fall_back:
                raise
            log.warning(
                "gemini_fallback",
                window=window,
                from_model=model,
                to_model=self.fallback_model,
                code=exc.code,
                status=exc.status,
            )
        fallback = self.fallback_model
        try:
            items, usage = await self._call_model(fallback, prompt, window)
        except GeminiUnavailable as exc:
            raise GeminiUnavailable(
                f"Gemini unavailable: {model} and fallback {fallback} both failed; last: {exc}",
                model=fallback,
                code=exc.code,
                status=exc.status,
            ) from exc
        return items, usage, fallback

    def _config(self, model: str) -> types.GenerateContentConfig:
        temperature = self._temperature
        if temperature is None and not model.startswith("gemini-3"):
            temperature = 0.0
        return types.GenerateContentConfig(
            system_instruction=SYSTEM_INSTRUCTION,
            response_mime_type="application/json",
            response_schema=RESPONSE_SCHEMA,
            temperature=temperature,
            http_options=types.HttpOptions(timeout=max(1, int(self._timeout_s * 1000))),
        )

    async def _call_model(self, model: str, prompt: str, window: int) -> tuple[list[Any], TokenUsage]:
        """One window on one model: transient errors are retried, a malformed answer once."""
        usage = TokenUsage()
        config = self._config(model)
        for tries in (1, 2):
            response, attempt, latency_ms = await request_with_retries(
                lambda: self._client.aio.models.generate_content(model=model, contents=prompt, config=config),
                model=model,
                max_retries=self._max_retries,
                backoff=self._backoff,
                timeout_s=self._timeout_s,
                event="gemini_call",
                window=window,
            )
            call_usage = _usage_of(response)
            usage = usage.add(call_usage)
            LLM_TOKENS.labels("extract", model, "prompt").inc(call_usage.prompt_tokens)
            LLM_TOKENS.labels("extract", model, "output").inc(call_usage.output_tokens)
            tokens = {
                "prompt_tokens": call_usage.prompt_tokens,
                "output_tokens": call_usage.output_tokens,
                "total_tokens": call_usage.total_tokens,
            }
            try:
                items = _facts_of(response)
            except Malformed as exc:
                log.warning(
                    "gemini_malformed_response",
                    model=model,
                    window=window,
                    attempt=attempt,
                    latency_ms=latency_ms,
                    reason=str(exc),
                    **tokens,
                )
                if tries == 2:
                    raise GeminiResponseError(
                        f"Gemini {model} returned malformed JSON twice: {exc}", model=model
                    ) from exc
                continue
            log.info(
                "gemini_call",
                model=model,
                window=window,
                attempt=attempt,
                latency_ms=latency_ms,
                items=len(items),
                **tokens,
            )
            return items, usage
        raise AssertionError("unreachable")  # pragma: no cover

    # --- validation ---------------------------------------------------------------------

    def _validate(
        self, item: Any, project_id: str | None, model: str, shown: range | None = None
    ) -> tuple[ExtractedFact | None, int]:
        """One returned item -> (fact or None, number of dropped items incl. nested ones): the check every provider
        shares (service/ai/llm/validation.py)."""
        return validate_item(item, project_id, model, shown, provider="gemini")


def _usage_of(response: types.GenerateContentResponse) -> TokenUsage:
    meta = response.usage_metadata
    if meta is None:
        return TokenUsage(calls=1)
    prompt = meta.prompt_token_count or 0
    # Thinking tokens are billed as output: count them with the candidates.
    output = (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0)
    total = meta.total_token_count or (prompt + output)
    return TokenUsage(prompt_tokens=prompt, output_tokens=output, total_tokens=total, calls=1)


def _facts_of(response: types.GenerateContentResponse) -> list[Any]:
    """The `facts` array of the JSON answer; raises Malformed when there is no parseable answer."""
    text = response.text
    if not text or not text.strip():
        reason: object = None
        if response.candidates:
            reason = response.candidates[0].finish_reason
        elif response.prompt_feedback is not None:
            reason = response.prompt_feedback.block_reason
        raise Malformed(f"empty answer (reason: {reason})")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Malformed(f"not JSON ({exc.msg} at {exc.pos}): {text[:120]!r}") from exc
    facts = data.get("facts") if isinstance(data, dict) else data
    if not isinstance(facts, list):
        raise Malformed(f"no 'facts' array in {text[:120]!r}")
    return facts

