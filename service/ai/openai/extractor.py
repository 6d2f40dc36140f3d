"""The extractor for OpenAI-compatible servers: the shared prompt and validation (service/ai/llm/), one repair
request per invalid answer, the fallback model, and the offline extractor for a window whose answers stay invalid.

A window's answer is invalid when it is not JSON, has no `facts` array, or every fact in it fails validation. The
model is then shown its answer and what was wrong with it, once. A second invalid answer hands that window alone
to the offline extractor (service/ai/offline/): the result says `extractor: "openai+offline"`, and the
conversation is stored as always, every message kept verbatim, so nothing said is dropped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import structlog

from service.ai.extraction import ExtractedFact, ExtractionResult, KnownMemory, Message, TokenUsage
from service.ai.llm.prompts import RESPONSE_SCHEMA, SYSTEM_INSTRUCTION, labels, render_conversation
from service.ai.llm.retry import Malformed
from service.ai.llm.validation import FactCollector, resolve_replaces, validate_item, windows
from service.ai.offline.extractor import OfflineExtractor
from service.ai.openai.client import (
    MODEL_NOT_FOUND,
    ChatClient,
    Mode,
    OpenAIError,
    OpenAIRequestError,
    OpenAIUnavailable,
    parse_json_answer,
    strict_schema,
)

log = structlog.get_logger(__name__)

REPAIR = """\
Your answer could not be used: {problem}
Answer again with only the JSON object {{"facts": [...]}} described above, each fact with a content sentence, one of
the 13 category names exactly as listed, scope, entities, relations and source_messages."""
OFFLINE_SUFFIX = "+offline"
# How much of an invalid answer the repair request shows the model: enough to see the mistake, little enough for a
# small local model to read again quickly (a looping answer runs to the token cap).
REPAIR_ECHO_CHARS = 1500


class WindowOutcome:
    """What one window's extraction ended with: the facts (None: answers invalid twice), counts, the model."""

    def __init__(self, facts: list[ExtractedFact] | None, dropped: int, usage: TokenUsage, model: str,
                 tries: int, mode: Mode | None) -> None:
        self.facts = facts
        self.dropped = dropped
        self.usage = usage
        self.model = model
        self.tries = tries
        self.mode = mode


class OpenAIExtractor:
    """Conversation -> facts through an OpenAI-compatible chat completions server."""

    name = "openai"

    def __init__(self, chat: ChatClient, model: str, fallback_model: str | None = None, *,
                 window_chars: int = 24_000, offline: OfflineExtractor | None = None) -> None:
        if window_chars < 200:
            raise ValueError("window_chars must be at least 200")
        self.chat = chat
        self.model = model
        self.fallback_model = fallback_model or None
        self._window_chars = window_chars
        self._offline = offline or OfflineExtractor()
        self._schema = strict_schema(RESPONSE_SCHEMA)
        # windows by how they ended since start: first_try, repaired, offline (the benchmark reads them)
        self.outcomes: Counter[str] = Counter()

    names_replacements = True

    async def extract(self, messages: list[Message], project_id: str | None = None,
                      known: Sequence[KnownMemory] = ()) -> ExtractionResult:
        """`known`: the user's stored memories this conversation may change; each fact names those it replaces."""
        collector = FactCollector()
        usage = TokenUsage()
        dropped = 0
        offline_windows = 0
        model = self.model
        parts = windows(messages, self._window_chars)
        for number, (start, window) in enumerate(parts):
            shown = range(start, start + len(window))
            prompt = render_conversation(window, project_id, start_index=start, max_message_chars=self._window_chars,
                                         known=known)
            outcome = await self._window_with_fallback(model, prompt, project_id, shown, number)
            model = outcome.model
            usage = usage.add(outcome.usage)
            dropped += outcome.dropped
            if outcome.facts is None:
                offline_windows += 1
                self.outcomes["offline"] += 1
                for fact in self._offline.extract_sync(list(window), project_id):
                    fact.source_messages[:] = [start + i for i in fact.source_messages]
                    collector.add(fact)
                log.warning("openai_window_offline", model=model, window=number, messages=len(window))
                continue
            self.outcomes["first_try" if outcome.tries == 1 else "repaired"] += 1
            for fact in outcome.facts:
                collector.add(fact)
        resolve_replaces(collector.facts, labels(known), provider="openai", model=model)
        extractor = self.name + OFFLINE_SUFFIX if offline_windows else model
        log.info("openai_extracted", model=model, windows=len(parts), offline_windows=offline_windows,
                 facts=len(collector.facts), dropped=dropped, prompt_tokens=usage.prompt_tokens,
                 output_tokens=usage.output_tokens, calls=usage.calls)
        return ExtractionResult(facts=collector.facts, extractor=extractor, usage=usage, dropped=dropped)

    def windows(self, messages: Sequence[Message]) -> list[tuple[int, list[Message]]]:
        """(index of the first message, messages) per window, as the extraction splits the conversation."""
        return windows(messages, self._window_chars)

    # --- one window ---------------------------------------------------------------------

    async def _window_with_fallback(self, model: str, prompt: str, project_id: str | None, shown: range,
                                    window: int) -> WindowOutcome:
        try:
            return await self._window(model, prompt, project_id, shown, window)
        except OpenAIError as exc:
            fallback = self.fallback_model
            can_fall_back = fallback is not None and model != fallback and (
                isinstance(exc, OpenAIUnavailable)
                or (isinstance(exc, OpenAIRequestError) and exc.code == MODEL_NOT_FOUND))
            if not can_fall_back or fallback is None:
                raise
            log.warning("openai_fallback", window=window, from_model=model, to_model=fallback, code=exc.code)
        try:
            return await self._window(fallback, prompt, project_id, shown, window)
        except OpenAIUnavailable as exc:
            raise OpenAIUnavailable(f"LLM unavailable: {model} and fallback {fallback} both failed; last: {exc}",
                                    model=fallback, code=exc.code) from exc

    async def _window(self, model: str, prompt: str, project_id: str | None, shown: range,
                      window: int) -> WindowOutcome:
        """One window on one model: an invalid answer gets one repair request showing what was wrong."""
        turns: list[dict[str, str]] = [{"role": "user", "content": prompt}]
        usage = TokenUsage()
        mode: Mode | None = None
        for tries in (1, 2):
            text, call_usage, mode = await self.chat.complete_json(
                model, SYSTEM_INSTRUCTION, turns, "extraction", self._schema, stage="extract", event="openai_call",
                window=window, tries=tries)
            usage = usage.add(call_usage)
            facts, dropped, problem = self._read(text, project_id, model, shown)
            if problem is None:
                await self.chat.modes.accepted(model, mode)
                return WindowOutcome(facts, dropped, usage, model, tries, mode)
            log.warning("openai_invalid_answer", model=model, window=window, tries=tries, mode=mode,
                        problem=problem[:300])
            turns = [*turns, {"role": "assistant", "content": text[:REPAIR_ECHO_CHARS]},
                     {"role": "user", "content": REPAIR.format(problem=problem[:1500])}]
        return WindowOutcome(None, 0, usage, model, 2, mode)

    @staticmethod
    def _read(text: str, project_id: str | None, model: str,
              shown: range) -> tuple[list[ExtractedFact], int, str | None]:
        """(valid facts, dropped items, None) or ([], 0, what was wrong) for an invalid answer."""
        try:
            data: Any = parse_json_answer(text)
        except Malformed as exc:
            return [], 0, str(exc)
        items = data.get("facts") if isinstance(data, dict) else data
        if not isinstance(items, list):
            return [], 0, f'no "facts" array in {text[:120]!r}'
        errors: list[str] = []
        facts: list[ExtractedFact] = []
        dropped = 0
        for item in items:
            fact, bad = validate_item(item, project_id, model, shown, provider="openai", errors=errors)
            dropped += bad
            if fact is not None:
                facts.append(fact)
        if items and not facts:
            return [], 0, "no fact was valid: " + "; ".join(errors[:3])
        return facts, dropped, None
