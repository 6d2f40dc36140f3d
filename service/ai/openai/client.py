"""One OpenAI-compatible server (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp's server, LM Studio; docs/llm.md)
through the official `openai` SDK, with our own retries: the SDK client is built with `max_retries=0`, so every
attempt is one HTTP request we can log, back off from (a 429's Retry-After raises the floor) and fall back from.

Structured output that survives small models: a JSON answer is asked for as `response_format` json_schema (strict),
and a server that refuses that (400/422) is asked again in JSON mode, then with no response format at all (the
schema in the prompt, the answer read from a fenced block). Which mode each model of the server accepted is kept
in memory (`ModeBook`), logged when learned and shown by /health.

Nothing here reads the environment; the URL, key, models and limits come in through the constructors."""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import openai
import structlog
from openai import AsyncOpenAI
from pydantic import BaseModel

from service.ai.extraction import TokenUsage
from service.ai.llm.retry import Backoff, Malformed, call_with_retries
from service.core.errors import DependencyUnavailable, ServiceError
from service.core.metrics import LLM_TOKENS

log = structlog.get_logger(__name__)
T = TypeVar("T")

Mode = Literal["json_schema", "json_object", "text"]
MODES: tuple[Mode, ...] = ("json_schema", "json_object", "text")
OPENAI_URL = "https://api.openai.com/v1"
# HTTP statuses worth another attempt on the same model.
TRANSIENT_CODES = frozenset({408, 409, 429, 500, 502, 503, 504})
# A request with a response format answered with one of these: the server does not take that format.
FORMAT_REJECTED = frozenset({400, 415, 422, 501})
MODEL_NOT_FOUND = 404
# An API key the SDK sends when none is set: local servers ignore it, and the SDK must not read $OPENAI_API_KEY.
NO_KEY = "no-key"


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class OpenAIError(ServiceError):
    """A call to the OpenAI-compatible server failed for good. `code` is the HTTP status when there was one."""

    def __init__(self, message: str, *, model: str, code: int | None = None, format_rejected: bool = False) -> None:
        super().__init__(message)
        self.model = model
        self.code = code
        self.format_rejected = format_rejected  # the server refused the response format asked for


class OpenAIUnavailable(OpenAIError, DependencyUnavailable):
    """Transient failures (429/5xx/timeouts/refused connections) outlasted every retry (and the fallback model)."""


class OpenAIRequestError(OpenAIError):
    """The server rejected the request (400/401/403/404 ...): retrying the same request will not help."""


class OpenAIResponseError(OpenAIError):
    """The server answered, but not with the JSON asked for."""




def make_client(base_url: str | None, api_key: str | None, timeout_s: float = 60) -> AsyncOpenAI:
    """The SDK's async client for one server, without SDK-level retries (ours are in `request_with_retries`)."""
    return AsyncOpenAI(api_key=api_key or NO_KEY, base_url=base_url or OPENAI_URL, timeout=timeout_s, max_retries=0)


def server_of(base_url: str | None) -> str:
    """The server as logs and /health name it: scheme, host and path, never a key or a password."""
    from service.core.settings import mask_url

    return mask_url(base_url or OPENAI_URL).rstrip("/")


# --------------------------------------------------------------------------------------------
# Retries
# --------------------------------------------------------------------------------------------


def retry_after_s(exc: BaseException) -> float | None:
    """A 429/503's `Retry-After` (seconds or an HTTP date) or `retry-after-ms`, when the server sent one."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff(base_delay_s: float, max_delay_s: float) -> Backoff:
    """The back-off of this provider's retries: its server's hint (retry_after_s) raises the floor."""
    return Backoff(base_delay_s, max_delay_s, retry_after_s)


CALL_ERRORS: tuple[type[BaseException], ...] = (openai.APIStatusError, openai.APIConnectionError, TimeoutError)


def _names_format(exc: BaseException) -> bool:
    text = str(exc).casefold()
    return "response_format" in text or "json_schema" in text or "json_object" in text


def _describe(exc: BaseException) -> tuple[int | None, str]:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code, type(exc).__name__
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return None, "TIMEOUT"
    return None, type(exc).__name__


async def request_with_retries(
    request: Callable[[], Awaitable[T]],
    *,
    model: str,
    max_retries: int,
    backoff: Backoff,
    timeout_s: float,
    event: str,
    stage: str = "extract",
    limiter: asyncio.Semaphore | None = None,
    format_sent: bool = False,
    **fields: Any,
) -> tuple[T, int, int]:
    """Run one HTTP request, retrying transient failures -> (result, attempt, latency_ms).

    Raises OpenAIRequestError at once for a non-transient status, OpenAIUnavailable once 1 + max_retries attempts
    have failed transiently. `limiter` bounds the requests in flight (LLM_CONCURRENCY); it is not held while
    backing off. `format_sent`: the request carries a response format, and an error that names it is a refusal
    whatever its status (llama-cpp-python's server answers an unknown format with 500)."""

    def refused(exc: BaseException, code: int | None) -> bool:
        return format_sent and code is not None and (code in FORMAT_REJECTED or _names_format(exc))

    def classify(exc: BaseException) -> tuple[int | None, str, bool]:
        code, status = _describe(exc)
        return code, status, not refused(exc, code) and (code is None or code in TRANSIENT_CODES)

    def rejected(exc: BaseException, what: str, code: int | None, status: str) -> Exception:
        return OpenAIRequestError(f"the LLM server rejected the request to {model}: {what}: {str(exc)[:300]}",
                                  model=model, code=code, format_rejected=refused(exc, code))

    def unavailable(attempts: int, what: str, code: int | None, status: str) -> Exception:
        return OpenAIUnavailable(f"LLM {model} failed {attempts} times; last: {what}", model=model, code=code)

    return await call_with_retries(request, errors=CALL_ERRORS, classify=classify, rejected=rejected,
                                   unavailable=unavailable, model=model, max_retries=max_retries, backoff=backoff,
                                   timeout_s=timeout_s, event=event, stage=stage, log=log, limiter=limiter, **fields)


# --------------------------------------------------------------------------------------------
# Structured output
# --------------------------------------------------------------------------------------------

# Keywords OpenAI's strict mode refuses; the answer is validated by our pydantic models anyway.
_UNSUPPORTED = ("default", "minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "format")


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A pydantic model's JSON schema in the form strict structured output accepts: every property required
    (optional ones are nullable), no additional properties, no length or default keywords."""
    schema = model.model_json_schema()

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and isinstance(node.get("properties"), dict):
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
                for value in node["properties"].values():
                    fix(value)
                for key, value in node.items():
                    if key != "properties":
                        fix(value)
                return
            for key in _UNSUPPORTED:
                node.pop(key, None)
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(schema)
    return schema


_FENCED = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json_answer(text: str | None) -> Any:
    """The JSON of an answer: the whole text, else a fenced ```json block, else the outermost {...};
    raises Malformed when there is none."""
    if text is None or not text.strip():
        raise Malformed("an empty answer")
    body = text.strip()
    candidates = [body, *(m.group(1).strip() for m in _FENCED.finditer(body))]
    first, last = body.find("{"), body.rfind("}")
    if 0 <= first < last:
        candidates.append(body[first : last + 1])
    error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            error = error or exc
    assert error is not None
    raise Malformed(f"not JSON ({error.msg} at {error.pos}): {body[:120]!r}")


class ModeBook:
    """Which structured-output mode each model of one server accepted: the one tried first for it from then on.

    In memory per process: a restart learns again, at the cost of one refused request per model. `sink` also
    records an accepted mode where other processes read it (Redis: the API's /health, when the worker runs apart)."""

    def __init__(self, server: str, sink: Callable[[str, str], Awaitable[None]] | None = None) -> None:
        self.server = server
        self.sink = sink
        self._trying: dict[str, Mode] = {}
        self._accepted: dict[str, Mode] = {}

    def current(self, model: str) -> Mode:
        return self._trying.get(model, "json_schema")

    def prefer(self, model: str, mode: Mode) -> None:
        """Start `model` at `mode` (a benchmark comparing modes; the server may still refuse it)."""
        self._trying[model] = mode

    def downgrade(self, model: str, reason: str) -> Mode | None:
        """The next mode after the server refused the current one, or None when it refused them all."""
        mode = self.current(model)
        index = MODES.index(mode)
        if index + 1 >= len(MODES):
            self._trying.pop(model, None)
            return None
        following = MODES[index + 1]
        self._trying[model] = following
        log.warning("llm_structured_mode_refused", server=self.server, model=model, refused=mode, next=following,
                    reason=reason[:300])
        return following

    async def accepted(self, model: str, mode: Mode) -> None:
        if self._accepted.get(model) != mode:
            self._accepted[model] = mode
            log.info("llm_structured_mode", server=self.server, model=model, mode=mode)
            if self.sink is not None:
                await self.sink(model, mode)

    def snapshot(self) -> dict[str, str]:
        """model -> the mode its answers came back in (models that have not answered yet are absent)."""
        return dict(self._accepted)


def response_format(mode: Mode, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode == "json_object":  # `schema`: an extension llama-cpp-python (a grammar) and Anyscale honour, others ignore
        return {"type": "json_object", "schema": schema}
    return None


def schema_note(schema: dict[str, Any]) -> str:
    """What the system prompt adds when the server does not enforce the schema itself."""
    return ("\n\nAnswer with one JSON object (no prose, no markdown) that matches this JSON schema:\n"
            + json.dumps(schema, separators=(",", ":")))


def usage_of(response: Any) -> TokenUsage:
    usage = getattr(response, "usage", None)
    if usage is None:
        return TokenUsage(calls=1)
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    output = int(getattr(usage, "completion_tokens", 0) or 0)
    total = int(getattr(usage, "total_tokens", 0) or 0) or prompt + output
    return TokenUsage(prompt_tokens=prompt, output_tokens=output, total_tokens=total, calls=1)


class ChatClient:
    """Chat completions of one server that answer JSON: the mode book, retries, the concurrency bound, token
    metrics. Shared by the extractor and the summarizers of one process."""

    def __init__(
        self,
        client: AsyncOpenAI,
        server: str,
        *,
        timeout_s: float = 60,
        max_retries: int = 3,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        concurrency: int = 4,
        temperature: float | None = 0.0,
        max_output_tokens: int | None = 4096,
    ) -> None:
        self.client = client
        self.server = server
        self.modes = ModeBook(server)
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff = backoff(base_delay_s, max_delay_s)
        self.limiter = asyncio.Semaphore(max(1, concurrency))
        self.temperature = temperature
        # A cap on each answer: a small model looping inside a JSON string ends as a truncated (invalid) answer that
        # is repaired or falls back, instead of running into the timeout. Sent as `max_tokens`, which every server
        # takes but OpenAI's reasoning models, which ask for `max_completion_tokens` (switched to on their 400).
        self.max_output_tokens = max_output_tokens
        self._tokens_param = "max_tokens"
        # Models whose chat template drops the system message (llama-cpp-python's Gemma format): the instructions
        # go at the start of the first user turn instead. Found from the prompt tokens the server counted.
        self.system_in_user: set[str] = set()

    async def complete_json(
        self,
        model: str,
        system: str,
        turns: list[dict[str, str]],
        name: str,
        schema: dict[str, Any],
        *,
        stage: str,
        event: str,
        **fields: Any,
    ) -> tuple[str, TokenUsage, Mode]:
        """One answer of `model` to `system` + `turns`, in the best mode the server takes -> (text, usage, mode).
        The text is not parsed here (parse_json_answer), so the caller can show a bad one to the model."""
        while True:
            mode = self.modes.current(model)
            prompt = system if mode == "json_schema" else system + schema_note(schema)
            messages: list[Any] = [{"role": "system", "content": prompt}, *turns]
            if model in self.system_in_user and turns:
                first = turns[0]
                messages = [{"role": first["role"], "content": f"{prompt}\n\n{first['content']}"}, *turns[1:]]
            extra: dict[str, Any] = {}
            fmt = response_format(mode, name, schema)
            if fmt is not None:
                extra["response_format"] = fmt
            if self.temperature is not None:
                extra["temperature"] = self.temperature
            if self.max_output_tokens is not None:
                extra[self._tokens_param] = self.max_output_tokens
            try:
                response, attempt, latency_ms = await request_with_retries(
                    functools.partial(self.client.chat.completions.create, model=model, messages=messages, **extra),
                    model=model, max_retries=self.max_retries, backoff=self.backoff, timeout_s=self.timeout_s,
                    event=event, stage=stage, limiter=self.limiter, format_sent=fmt is not None, mode=mode, **fields)
            except OpenAIRequestError as exc:
                if exc.code == 400 and self._drop_refused_option(model, str(exc)):
                    continue
                if exc.format_rejected and self.modes.downgrade(model, str(exc)):
                    continue
                raise
            usage = usage_of(response)
            if 0 < usage.prompt_tokens * 8 < len(prompt) and model not in self.system_in_user:
                # fewer prompt tokens than the instructions alone hold: the server dropped the system message
                self.system_in_user.add(model)
                log.warning("llm_system_message_dropped", server=self.server, model=model,
                            prompt_tokens=usage.prompt_tokens, system_chars=len(prompt))
                continue
            LLM_TOKENS.labels(stage, model, "prompt").inc(usage.prompt_tokens)
            LLM_TOKENS.labels(stage, model, "output").inc(usage.output_tokens)
            choices = getattr(response, "choices", None) or []
            text = choices[0].message.content if choices else None
            log.info(event, model=model, mode=mode, attempt=attempt, latency_ms=latency_ms,
                     prompt_tokens=usage.prompt_tokens, output_tokens=usage.output_tokens,
                     finish_reason=choices[0].finish_reason if choices else None, **fields)
            return text or "", usage, mode

    def _drop_refused_option(self, model: str, error: str) -> bool:
        """A 400 naming an option we send that the model does not take (OpenAI's reasoning models: `max_tokens`,
        a temperature other than 1): ask again without it. True when something changed."""
        if self._tokens_param == "max_tokens" and "max_tokens" in error:
            self._tokens_param = "max_completion_tokens"
        elif self.temperature is not None and "temperature" in error:
            self.temperature = None
        else:
            return False
        log.warning("llm_option_refused", server=self.server, model=model, error=error[:200],
                    tokens_param=self._tokens_param, temperature=self.temperature)
        return True
