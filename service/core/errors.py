"""One exception root for the service; the API maps each kind to an HTTP status in one handler
(service/app.py: `status_code` of the class; 401 adds WWW-Authenticate, 429 adds Retry-After).

Every exception class of the service, and where it lives:

- here: ServiceError (500), DomainError (400), PayloadTooLarge (413), SchemaError (422), NotFound (404),
  DependencyUnavailable (503: a store, Redis or Gemini unavailable; the worker retries it),
  ConfigError and its StoreConfigError (500), Unauthorized (401), Forbidden (403), RateLimited (429);
- service/ai/gemini/client.py: GeminiError and its kinds GeminiUnavailable (also a
  DependencyUnavailable), GeminiRequestError, GeminiResponseError; Malformed (internal: an answer
  that is not the JSON asked for, retried, never leaves the module);
- service/ai/openai/client.py: OpenAIError and its kinds OpenAIUnavailable (also a DependencyUnavailable),
  OpenAIRequestError, OpenAIResponseError, as Gemini's; Malformed (internal); service/ai/openai/embedder.py:
  EmbeddingDimensionError (a ConfigError: the server's vectors are not OPENAI_EMBEDDING_DIM long);
- service/ledger/outbox.py: MemoryBusy (409: another job holds a memory's lock; the worker retries it);
- service/ai/local.py: EmbedderConfigError (a ConfigError: the model files are missing or damaged);
- service/mcp/backend.py: ApiError (the REST API's 4xx/5xx, seen by the stdio MCP server).

What the worker retries and what ends a task failed is decided in one place: worker/jobs.py (is_transient).
"""

from __future__ import annotations


class ServiceError(Exception):
    """Root of every error the service raises on purpose. `error_code` is the error body's machine-readable
    `code` (docs/api.md lists them); a class without its own takes its status's (service/api/errors.py)."""

    status_code = 500
    error_code: str | None = None


class DomainError(ServiceError):
    """Input that is well-formed but breaks a domain rule (unknown category, scope without project)."""

    status_code = 400


class PayloadTooLarge(ServiceError):
    status_code = 413


class SchemaError(ServiceError):
    """A request that breaks its schema where the model cannot say it (a field required by who is calling, e.g.
    `user_id` with an admin key): 422 like every schema error, with the field in `errors`."""

    status_code = 422

    def __init__(self, message: str, loc: tuple[str, ...] = (), kind: str = "missing") -> None:
        super().__init__(message)
        self.errors = [{"loc": list(loc), "type": kind, "msg": message}]


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    """The operation is already under way (e.g. an index build)."""

    status_code = 409


class DependencyUnavailable(ServiceError):
    """A store or the queue is unreachable: never fall back silently, answer 503. `public` is what the API's answer
    says when set (the cause in the user's terms, no URL or server message); the message itself goes to the log."""

    status_code = 503

    def __init__(self, message: str, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public


class ConfigError(ServiceError):
    """The service cannot start as configured: `python -m service` exits with this one line."""


class StoreConfigError(ConfigError):
    """A store is configured in a way that would corrupt data (e.g. embedder dimension mismatch)."""

    status_code = 500


class Unauthorized(ServiceError):
    """No API key where one is required, or a key that is malformed, unknown or revoked."""

    status_code = 401


class Forbidden(ServiceError):
    """A valid key asking for something it may not do (another user, maintenance without admin)."""

    status_code = 403


class RateLimited(ServiceError):
    status_code = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# The id rules of the API in words: a pattern the user broke is named by what it allows, not by its regex
PATTERN_RULES: dict[str, str] = {
    r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$": ("1 to 128 letters, digits or _ . : @ -, starting with a letter or "
                                               "digit (e.g. alice, alice@example.com, repo:shop)"),
    r"^[A-Za-z0-9_-]{1,64}$": "1 to 64 letters, digits, _ or -",
    r"^[A-Za-z0-9_.:\-]{1,64}$": "1 to 64 letters, digits or _ . : -",
    r"^[A-Za-z0-9-]+$": "letters, digits and - only (an id as the API gave it)",
    r"^[A-Za-z0-9_-]+$": "letters, digits, _ and - only (an id as the API gave it)",
    r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$": "letters, digits or _ . : -, starting with a letter or digit",
    r"^[0-9]+$": "digits only",
}


def validation_message(error: dict[str, object]) -> str:
    """One field's validation error in words: a broken id pattern says its rule, invalid JSON says what is wrong;
    anything else keeps pydantic's message."""
    kind = error.get("type")
    ctx = error.get("ctx")
    ctx = ctx if isinstance(ctx, dict) else {}
    if kind == "string_pattern_mismatch" and (rule := PATTERN_RULES.get(str(ctx.get("pattern")))):
        return f"must be {rule}"
    if kind == "json_invalid" and ctx.get("error"):
        text = str(ctx["error"])
        return f"invalid JSON: {text[:1].lower()}{text[1:]}"
    return str(error.get("msg", "invalid"))

