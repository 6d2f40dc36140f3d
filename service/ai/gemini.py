"""Gemini backends (google-genai): the LLM extractor and the embedder.

Both own their retries: the client is built without SDK retry options, so every attempt is one
HTTP request we can log, back off from and (for the extractor) fall back from. Nothing here reads
the environment; keys, models and limits come in through the constructors.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import date, datetime
from typing import Any, TypeVar

import structlog
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from pydantic import ValidationError

from service.ai.extraction import (
    ExtractedEntity,
    ExtractedFact,
    ExtractedRelation,
    ExtractionResult,
    Message,
    TokenUsage,
)
from service.ai.prompts import RESPONSE_SCHEMA, SYSTEM_INSTRUCTION, render_conversation, render_message
from service.domain import normalise
from service.errors import DependencyUnavailable, ServiceError

log = structlog.get_logger(__name__)
T = TypeVar("T")

# HTTP statuses worth another attempt on the same model.
TRANSIENT_CODES = frozenset({408, 429, 500, 502, 503, 504})
# Statuses after which the extractor switches to the fallback model once the retries are spent:
# overloaded or out of quota.
FALLBACK_CODES = frozenset({429, 503})
# Also falls back (without retrying) when the primary model does not exist, e.g. a retired preview.
MODEL_NOT_FOUND = 404
MAX_ITEMS_PER_FACT = 32  # ExtractedFact.entities / relations max_length
GEMINI_MAX_EMBED_BATCH = 100  # batchEmbedContents accepts at most 100 requests


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection errors and timeouts of whichever HTTP stack google-genai uses (httpx2 or httpx)."""
    found: list[type[BaseException]] = [TimeoutError, ConnectionError]
    for module_name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - depends on the install
            continue
        found.append(module.TransportError)
    return tuple(found)


TRANSPORT_ERRORS = _transport_errors()
CALL_ERRORS: tuple[type[BaseException], ...] = (genai_errors.APIError, *TRANSPORT_ERRORS)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class GeminiError(ServiceError):
    """A Gemini call failed for good. `code` is the HTTP status when there was one."""

    def __init__(self, message: str, *, model: str, code: int | None = None, status: str | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.code = code
        self.status = status


class GeminiUnavailable(GeminiError, DependencyUnavailable):
    """Transient failures (429/5xx/timeouts) outlasted every retry (and the fallback model)."""


class GeminiRequestError(GeminiError):
    """Gemini rejected the request (400/401/403/404 ...): retrying the same request will not help."""


class GeminiResponseError(GeminiError):
    """Gemini answered, but not with the JSON the response schema asks for, twice in a row."""


class _Malformed(Exception):
    pass


def make_client(
    api_key: str, base_url: str | None = None, timeout_s: float = 60, *, api_version: str = "v1beta"
) -> genai.Client:
    """A Gemini Developer API client (never Vertex), without SDK-level retries.

    `base_url` points the client at a proxy or a test fake (e.g. "http://127.0.0.1:8123/");
    requests go to `{base_url}{api_version}/models/{model}:{method}`. The API version is pinned
    because google-genai 3.x defaults to "v1" (or $GOOGLE_GENAI_API_VERSION); structured output
    and the preview models are documented on v1beta. HttpOptions.timeout is in milliseconds.
    """
    if not api_key:
        # An empty key would make google-genai fall back to $GOOGLE_API_KEY / $GEMINI_API_KEY.
        raise ValueError("make_client needs a Gemini API key (GOOGLE_API_KEY)")
    options = types.HttpOptions(api_version=api_version, timeout=max(1, int(timeout_s * 1000)))
    if base_url:
        options.base_url = base_url
    return genai.Client(api_key=api_key, vertexai=False, http_options=options)


def _retry_hint_s(exc: BaseException) -> float | None:
    """`retryDelay` ("12s") from a 429's google.rpc.RetryInfo detail, if present."""
    if not isinstance(exc, genai_errors.APIError) or not isinstance(exc.details, dict):
        return None
    details = exc.details.get("error", exc.details).get("details") or []
    for detail in details if isinstance(details, list) else []:
        raw = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(raw, str) and raw.endswith("s"):
            try:
                return float(raw[:-1])
            except ValueError:
                return None
    return None


class _Backoff:
    def __init__(self, base_delay_s: float, max_delay_s: float) -> None:
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s

    def delay(self, failures: int, exc: BaseException | None = None) -> float:
        """Exponential with jitter: base * 2^(n-1) * [0.5, 1], capped; a server hint raises the floor."""
        raw = min(self.max_delay_s, self.base_delay_s * 2.0 ** max(0, failures - 1))
        delay = raw * (0.5 + random.random() / 2)
        hint = _retry_hint_s(exc) if exc is not None else None
        if hint is not None:
            delay = min(self.max_delay_s, max(delay, hint))
        return delay


def _describe(exc: BaseException) -> tuple[int | None, str]:
    if isinstance(exc, genai_errors.APIError):
        return exc.code, str(exc.status or "")
    if isinstance(exc, TimeoutError):
        return None, "TIMEOUT"
    return None, type(exc).__name__


async def _request_with_retries(
    request: Callable[[], Awaitable[T]],
    *,
    model: str,
    max_retries: int,
    backoff: _Backoff,
    timeout_s: float,
    event: str,
    **fields: Any,
) -> tuple[T, int, int]:
    """Run one HTTP request, retrying transient failures -> (result, attempt, latency_ms).

    Raises GeminiRequestError at once for a non-transient status, GeminiUnavailable once
    1 + max_retries attempts have failed transiently.
    """
    attempt = 0
    while True:
        attempt += 1
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(request(), timeout=timeout_s)
        except CALL_ERRORS as exc:
            latency_ms = round((time.perf_counter() - started) * 1000)
            code, status = _describe(exc)
            what = f"{code} {status}" if code is not None else status
            transient = not isinstance(exc, genai_errors.APIError) or exc.code in TRANSIENT_CODES
            log.warning(
                f"{event}_failed",
                model=model,
                attempt=attempt,
                code=code,
                status=status,
                latency_ms=latency_ms,
                transient=transient,
                error=str(exc)[:300],
                **fields,
            )
            if not transient:
                detail = getattr(exc, "message", None) or exc
                raise GeminiRequestError(
                    f"Gemini rejected the request to {model}: {what}: {detail}", model=model, code=code, status=status
                ) from exc
            if attempt > max_retries:
                raise GeminiUnavailable(
                    f"Gemini {model} failed {attempt} times; last: {what}", model=model, code=code, status=status
                ) from exc
            await asyncio.sleep(backoff.delay(attempt, exc))
            continue
        return result, attempt, round((time.perf_counter() - started) * 1000)


# --------------------------------------------------------------------------------------------
# Extractor
# --------------------------------------------------------------------------------------------

_PREDICATE_JUNK = re.compile(r"[^a-z0-9]+")


def _snake(predicate: str) -> str:
    return _PREDICATE_JUNK.sub("_", predicate.strip().casefold()).strip("_")


def _iso_or_none(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or text.casefold() in {"null", "none", "unknown", "n/a"}:
        return None
    try:
        if len(text) == 10:
            date.fromisoformat(text)
        else:
            datetime.fromisoformat(text)
    except ValueError:
        return None
    return text


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
        self._backoff = _Backoff(base_delay_s, max_delay_s)
        self._temperature = temperature

    # --- public -------------------------------------------------------------------------

    async def extract(self, messages: list[Message], project_id: str | None = None) -> ExtractionResult:
        windows = self.windows(messages)
        usage = TokenUsage()
        facts: list[ExtractedFact] = []
        seen: set[tuple[str, str]] = set()
        dropped = 0
        model = self.model
        for number, (start, window) in enumerate(windows):
            prompt = render_conversation(window, project_id, start_index=start, max_message_chars=self._window_chars)
            items, window_usage, model = await self._call_with_fallback(model, prompt, number)
            usage = usage.add(window_usage)
            for item in items:
                fact, bad = self._validate(item, project_id, model)
                dropped += bad
                if fact is None:
                    continue
                key = (normalise(fact.content), fact.category)
                if key not in seen:
                    seen.add(key)
                    facts.append(fact)
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
        """Whole messages packed into windows of at most `window_chars` rendered characters.

        Returns (index of the first message, messages). A single message longer than a window
        gets a window of its own and is cut when rendered.
        """
        out: list[tuple[int, list[Message]]] = []
        current: list[Message] = []
        start = 0
        size = 0
        for index, message in enumerate(messages):
            length = min(len(render_message(index, message)), self._window_chars) + 1
            if current and size + length > self._window_chars:
                out.append((start, current))
                current, size, start = [], 0, index
            current.append(message)
            size += length
        if current:
            out.append((start, current))
        return out

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
            response, attempt, latency_ms = await _request_with_retries(
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
            tokens = {
                "prompt_tokens": call_usage.prompt_tokens,
                "output_tokens": call_usage.output_tokens,
                "total_tokens": call_usage.total_tokens,
            }
            try:
                items = _facts_of(response)
            except _Malformed as exc:
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

    def _validate(self, item: Any, project_id: str | None, model: str) -> tuple[ExtractedFact | None, int]:
        """One returned item -> (fact or None, number of dropped items incl. nested ones)."""
        if not isinstance(item, dict):
            log.warning("gemini_item_dropped", model=model, reason="not an object", item=repr(item)[:200])
            return None, 1
        dropped = 0
        entities: list[ExtractedEntity] = []
        names: set[str] = set()
        for raw in _as_list(item.get("entities")):
            try:
                entity = ExtractedEntity.model_validate(raw)
            except ValidationError as exc:
                dropped += 1
                log.warning("gemini_entity_dropped", model=model, error=_short(exc), item=repr(raw)[:200])
                continue
            if entity.name.casefold() not in names:
                names.add(entity.name.casefold())
                entities.append(entity)
        relations: list[ExtractedRelation] = []
        for raw in _as_list(item.get("relations")):
            candidate = dict(raw) if isinstance(raw, dict) else raw
            if isinstance(candidate, dict) and isinstance(candidate.get("predicate"), str):
                candidate["predicate"] = _snake(candidate["predicate"])
            try:
                relation = ExtractedRelation.model_validate(candidate)
            except ValidationError as exc:
                dropped += 1
                log.warning("gemini_relation_dropped", model=model, error=_short(exc), item=repr(raw)[:200])
                continue
            relations.append(relation)
            for endpoint in (relation.subject, relation.object):  # every endpoint is an entity
                if endpoint.casefold() not in names:
                    names.add(endpoint.casefold())
                    kind = "person" if endpoint.casefold() == "user" else "thing"
                    entities.append(ExtractedEntity(name=endpoint, type=kind))
        dropped += max(0, len(relations) - MAX_ITEMS_PER_FACT)  # extra entities are trimmed silently
        entities, relations = entities[:MAX_ITEMS_PER_FACT], relations[:MAX_ITEMS_PER_FACT]

        category = item.get("category")
        scope = item.get("scope")
        if isinstance(scope, str):
            scope = scope.strip().casefold() or None
        if scope not in (None, "global", "project"):
            scope = None
        if scope == "project" and not project_id:
            scope = "global"  # no project to attach it to
        content = item.get("content")
        candidate_fact = {
            "content": content.strip() if isinstance(content, str) else content,
            "category": category.strip().casefold() if isinstance(category, str) else category,
            "scope": scope,
            "entities": entities,
            "relations": relations,
            "valid_at": _iso_or_none(item.get("valid_at")),
        }
        try:
            fact = ExtractedFact.model_validate(candidate_fact)
        except ValidationError as exc:
            log.warning(
                "gemini_item_dropped",
                model=model,
                error=_short(exc),
                category=str(category)[:64],
                content=str(item.get("content"))[:200],
            )
            return None, dropped + 1
        return fact, dropped


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _short(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])


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
    """The `facts` array of the JSON answer; raises _Malformed when there is no parseable answer."""
    text = response.text
    if not text or not text.strip():
        reason: object = None
        if response.candidates:
            reason = response.candidates[0].finish_reason
        elif response.prompt_feedback is not None:
            reason = response.prompt_feedback.block_reason
        raise _Malformed(f"empty answer (reason: {reason})")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"not JSON ({exc.msg} at {exc.pos}): {text[:120]!r}") from exc
    facts = data.get("facts") if isinstance(data, dict) else data
    if not isinstance(facts, list):
        raise _Malformed(f"no 'facts' array in {text[:120]!r}")
    return facts


# --------------------------------------------------------------------------------------------
# Embedder
# --------------------------------------------------------------------------------------------


class GeminiEmbedder:
    """Embedder Protocol over `embed_content` (batchEmbedContents); vectors are L2-normalised here.

    Gemini only normalises its full-size (3072) embeddings; reduced `output_dimensionality`
    vectors are not unit length, and the vector store's cosine/dot scores assume they are.
    """

    def __init__(
        self,
        client: genai.Client,
        model: str,
        dim: int = 768,
        batch_size: int = 64,
        max_retries: int = 3,
        *,
        timeout_s: float = 30,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        task_type: str | None = None,
    ) -> None:
        self._client = client
        self.model = model
        self.dim = dim
        self.name = f"gemini:{model}:{dim}"
        self._batch_size = max(1, min(batch_size, GEMINI_MAX_EMBED_BATCH))
        self._max_retries = max(0, max_retries)
        self._timeout_s = timeout_s
        self._backoff = _Backoff(base_delay_s, max_delay_s)
        self._config = types.EmbedContentConfig(
            output_dimensionality=dim,
            task_type=task_type,
            http_options=types.HttpOptions(timeout=max(1, int(timeout_s * 1000))),
        )

    async def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(await self._embed_batch(texts[start : start + self._batch_size]))
        return out

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        # One Content per text: a bare list of strings can be merged into one multimodal
        # content by newer embedding models (gemini-embedding-2).
        contents: list[types.Content] = [types.Content(parts=[types.Part(text=t)]) for t in texts]
        response, attempt, latency_ms = await _request_with_retries(
            lambda: self._client.aio.models.embed_content(model=self.model, contents=contents, config=self._config),
            model=self.model,
            max_retries=self._max_retries,
            backoff=self._backoff,
            timeout_s=self._timeout_s,
            event="gemini_embed",
            batch=len(texts),
        )
        vectors = [list(e.values or []) for e in (response.embeddings or [])]
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise GeminiResponseError(
                f"Gemini embeddings ({self.model}): expected {len(texts)} vectors of {self.dim}, "
                f"got {len(vectors)} of {sorted({len(v) for v in vectors})}",
                model=self.model,
            )
        log.debug("gemini_embed", model=self.model, attempt=attempt, batch=len(texts), latency_ms=latency_ms)
        return [_unit(v) for v in vectors]


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:
        return [float(x) for x in vector]
    return [float(x) / norm for x in vector]
