"""One request of the client (`Call`: method, path, query, body, answer model), the error it raises (`ApiError`),
and the transport's retry rules (RETRIES with backoff, for transport errors and 503)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from service.routes import Route

T = TypeVar("T")
RETRIES = 4  # retries after the first attempt, for transport errors and 503
BACKOFF_S = 0.25  # doubled per retry, at most MAX_BACKOFF_S
MAX_BACKOFF_S = 4.0
FINISHED = ("completed", "failed")


class ApiError(Exception):
    """An error answer of the API (`status`, `code`, `detail`, `errors`), or the API unreachable (status 0)."""

    def __init__(self, status: int, code: str, detail: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}" if status else detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors or []

    @classmethod
    def of(cls, resp: httpx.Response) -> ApiError:
        try:
            body = resp.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        detail = body.get("detail")
        return cls(resp.status_code, str(body.get("code") or f"http_{resp.status_code}"),
                   detail if isinstance(detail, str) else (resp.text[:500] or resp.reason_phrase),
                   body.get("errors") if isinstance(body.get("errors"), list) else None)


class TaskFailed(ApiError):
    """`wait(raise_on_failure=True)` on a task that ended failed."""


CANDIDATES = 10  # the most memories an ambiguous id prefix lists


class AmbiguousId(ApiError):
    """An id prefix that starts several of the user's memory ids; `candidates` lists them (at most CANDIDATES)."""

    def __init__(self, ref: str, candidates: list[Any], more: bool) -> None:
        lines = "\n".join(f"  {m.id}  [{m.category}] {m.content[:60]}" for m in candidates)
        super().__init__(400, "ambiguous_id", f"'{ref}' is the start of {len(candidates)} memory ids"
                                              f"{' (and more)' if more else ''}; give more of the id:\n{lines}")
        self.candidates = candidates


def id_prefix(ref: str) -> str | None:
    """The hex digits of a short memory id ("3f2a9c1d", the 8 characters search and the CLI print); None for a full
    id (or something that is no id: the API says so)."""
    digits = ref.replace("-", "").lower()
    if not digits or len(digits) >= 32 or any(c not in "0123456789abcdef" for c in digits):
        return None
    return digits


def first_id_with(digits: str) -> str:
    """The smallest id that starts with `digits`: a listing in id order starts there."""
    return str(uuid.UUID(digits.ljust(32, "0")))


def pick(ref: str, digits: str, listed: list[Any]) -> str:
    """The one listed memory whose id starts with `digits`; ApiError 404 for none, AmbiguousId for several."""
    found = [m for m in listed if m.id.replace("-", "").startswith(digits)]
    if len(found) == 1:
        return str(found[0].id)
    if not found:
        raise ApiError(404, "not_found", f"no memory id starts with '{ref}'")
    raise AmbiguousId(ref, found[:CANDIDATES], len(found) > CANDIDATES)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: what is sent and the model its answer is read as (`answer` None: the raw text)."""

    method: str
    path: str
    answer: Any  # type[T] or a TypeAdapter-able type; None = text
    params: dict[str, Any] = field(default_factory=dict)
    body: BaseModel | dict[str, Any] | None = None
    content: bytes | None = None
    accept: tuple[int, ...] = ()  # error statuses whose body is still the answer (/health's 503)
    idempotency_key: str | None = None
    writes: bool = False  # sent with an Idempotency-Key (one per call, kept across its retries)

    @classmethod
    def to(cls, route: Route[T], *, params: dict[str, Any] | None = None,
           body: BaseModel | dict[str, Any] | None = None, content: bytes | None = None,
           accept: tuple[int, ...] = (), text: bool = False, **path: object) -> Call[T]:
        """A request of the declared `route` (service/routes.py); `path` fills its path parameters, `text` reads the
        answer as text (a markdown format of a JSON route)."""
        return cls(route.method, route.url(**path), None if text else route.answer, params or {}, body, content,
                   accept, writes=route.writes)

    def request(self, key: str | None) -> dict[str, Any]:
        headers = {"Idempotency-Key": key} if key else {}
        out: dict[str, Any] = {"params": {k: v for k, v in self.params.items() if v is not None}, "headers": headers}
        if isinstance(self.body, BaseModel):
            out["json"] = self.body.model_dump(mode="json", exclude_none=True)
        elif self.body is not None:
            out["json"] = self.body
        if self.content is not None:
            out["content"] = self.content
            headers["Content-Type"] = "application/octet-stream"
        return out

    def read(self, resp: httpx.Response) -> T:
        if resp.status_code >= 400 and resp.status_code not in self.accept:
            raise ApiError.of(resp)
        if self.answer is None:
            return resp.text  # type: ignore[return-value]
        value: T = TypeAdapter(self.answer).validate_python(resp.json())
        return value


def backoff(attempt: int) -> float:
    return float(min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempt))


def unreachable(url: str, exc: Exception) -> ApiError:
    return ApiError(0, "unreachable", f"the memory API at {url} is not reachable ({type(exc).__name__}: {exc}); "
                                      "start it (./scripts/dev.sh or python -m service) or set MEMORY_API_URL")


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
