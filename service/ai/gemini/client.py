"""The google-genai client and one request with our own retries: the client is built without SDK retry
options, so every attempt is one HTTP request we can log, back off from and (for the extractor) fall
back from. Nothing here reads the environment; keys, models and limits come in through the constructors."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx2
import structlog
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from service.ai.llm.retry import Backoff, call_with_retries
from service.core.errors import DependencyUnavailable, ServiceError

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
    """Connection errors and timeouts of the HTTP stacks google-genai may use (httpx2, pinned by make_client;
    httpx)."""
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
    # The transport is pinned to httpx2 (a dependency of google-genai, its default): left alone, the SDK switches
    # to aiohttp whenever aiohttp is importable, whose errors TRANSPORT_ERRORS does not name, so a refused
    # connection would fail a job instead of retrying it, depending on what else is installed.
    options = types.HttpOptions(api_version=api_version, timeout=max(1, int(timeout_s * 1000)),
                                async_client_args={"transport": httpx2.AsyncHTTPTransport()})
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


def backoff(base_delay_s: float, max_delay_s: float) -> Backoff:
    """The back-off of this provider's retries: its server's hint (_retry_hint_s) raises the floor."""
    return Backoff(base_delay_s, max_delay_s, _retry_hint_s)


def _describe(exc: BaseException) -> tuple[int | None, str]:
    if isinstance(exc, genai_errors.APIError):
        return exc.code, str(exc.status or "")
    if isinstance(exc, TimeoutError):
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
    **fields: Any,
) -> tuple[T, int, int]:
    """Run one HTTP request, retrying transient failures -> (result, attempt, latency_ms).

    Raises GeminiRequestError at once for a non-transient status, GeminiUnavailable once
    1 + max_retries attempts have failed transiently.
    """

    def classify(exc: BaseException) -> tuple[int | None, str, bool]:
        code, status = _describe(exc)
        return code, status, not isinstance(exc, genai_errors.APIError) or exc.code in TRANSIENT_CODES

    def rejected(exc: BaseException, what: str, code: int | None, status: str) -> Exception:
        detail = getattr(exc, "message", None) or exc
        return GeminiRequestError(f"Gemini rejected the request to {model}: {what}: {detail}", model=model, code=code,
                                  status=status)

    def unavailable(attempts: int, what: str, code: int | None, status: str) -> Exception:
        return GeminiUnavailable(f"Gemini {model} failed {attempts} times; last: {what}", model=model, code=code,
                                 status=status)

    return await call_with_retries(request, errors=CALL_ERRORS, classify=classify, rejected=rejected,
                                   unavailable=unavailable, model=model, max_retries=max_retries, backoff=backoff,
                                   timeout_s=timeout_s, event=event, stage=stage, log=log, **fields)

