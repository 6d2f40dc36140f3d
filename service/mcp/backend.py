"""What the MCP tools ask of the memory service: each operation declared once, with the call the API process makes
and the REST route that wraps the same call; and the two backends that run an operation.

`ServiceBackend` runs `Operation.local` in the API process (the HTTP transport, mounted in the API), on the read
side (`MemoryService`) or the intake, for the caller the MCP request's API key authenticated. `ApiBackend` sends the
operation's REST request (the stdio server: a separate process that must not open the embedded Qdrant shard the
API owns). Neither holds any logic of its own: validation, scope rules, queueing and search live in the service.
"""

from __future__ import annotations

import string
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, Field

from service.errors import DependencyUnavailable, ServiceError
from service.schemas import (
    AcceptedResponse,
    ContextResponse,
    DuplicatePage,
    EntityChange,
    GraphSearchResponse,
    MemoryPage,
    SearchResponse,
    TaskResponse,
)

if TYPE_CHECKING:
    from service.auth import Caller
    from service.memory import MemoryService
    from service.memory.intake import Intake

Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp", bound=BaseModel)


class TaskQuery(BaseModel):
    task_id: str


class ContextQuery(BaseModel):
    user_id: str
    project_id: str | None = Field(default=None, exclude=True)  # in the path
    max_tokens: int | None = None
    query: str | None = None


class MemoryListQuery(BaseModel):
    user_id: str
    scope: str | None = None
    category: str | None = None
    project_id: str | None = None
    agent_id: str | None = None
    limit: int = 50
    cursor: str | None = None


class DuplicateQuery(BaseModel):
    user_id: str
    project_id: str | None = None
    limit: int = 20
    cursor: str | None = None


@dataclass(frozen=True)
class Local:
    """What an operation runs on in the API process."""

    service: MemoryService
    intake: Intake
    caller: Caller


@dataclass(frozen=True)
class Operation(Generic[Req, Resp]):
    response: type[Resp]
    local: Callable[[Local, Req], Awaitable[Resp]]  # in the API process, under the caller's tenant rules
    method: Literal["GET", "POST"]  # the REST route: GET sends the request as query parameters, POST as JSON
    path: str | Callable[[Req], str]  # a template of the request's fields ("{task_id}"), or a function of it

    def route(self, req: Req) -> tuple[str, dict[str, Any]]:
        """The REST path of `req`, and the fields it does not carry."""
        fields = req.model_dump(mode="json", exclude_none=True)
        if callable(self.path):
            return self.path(req), fields
        named = {name for _, name, _, _ in string.Formatter().parse(self.path) if name}
        path = self.path.format_map({n: quote(str(fields[n]), safe="") for n in named})
        return path, {k: v for k, v in fields.items() if k not in named}


def for_user(
    method: Callable[[Local], Callable[[Req, str], Awaitable[Resp]]],
) -> Callable[[Local, Req], Awaitable[Resp]]:
    """`method(request, user)` for the user the request names, as the caller may act for."""
    return lambda on, req: method(on)(req, on.caller.user(getattr(req, "user_id", None)))


def _context_path(req: ContextQuery) -> str:
    return f"/v1/context/{quote(req.project_id, safe='') if req.project_id else 'global'}"


SEARCH = Operation(SearchResponse, for_user(lambda on: on.service.search), "POST", "/v1/search")
GRAPH_SEARCH = Operation(GraphSearchResponse, for_user(lambda on: on.service.graph_search), "POST", "/v1/graph/search")
SUBMIT_RAW = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_raw), "POST", "/v1/memories/raw")
SUBMIT_RAW_BATCH = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_raw_batch), "POST",
                             "/v1/memories/raw/batch")
SUBMIT_CONVERSATION = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_conversation), "POST",
                                "/v1/memories")
SUBMIT_BULK_DELETE = Operation(AcceptedResponse, for_user(lambda on: on.intake.submit_bulk_delete), "POST",
                               "/v1/memories/delete")
REVIEW_DUPLICATE = Operation(EntityChange, for_user(lambda on: on.service.review_duplicate), "POST",
                             "/v1/graph/duplicates/review")
MERGE_ENTITIES = Operation(EntityChange, for_user(lambda on: on.service.merge_entities), "POST",
                           "/v1/graph/entities/merge")
TASK_STATUS = Operation[TaskQuery, TaskResponse](
    TaskResponse, lambda on, r: on.service.task_status(r.task_id, on.caller.user_filter(None)),
    "GET", "/v1/memories/status/{task_id}")
CONTEXT = Operation[ContextQuery, ContextResponse](
    ContextResponse, lambda on, r: on.service.context(on.caller.user(r.user_id), r.project_id, max_tokens=r.max_tokens,
                                                      query=r.query), "GET", _context_path)
LIST_MEMORIES = Operation[MemoryListQuery, MemoryPage](
    MemoryPage, lambda on, r: on.service.list_memories(
        on.caller.user(r.user_id), scope=r.scope, category=r.category, project_id=r.project_id, agent_id=r.agent_id,
        limit=r.limit, cursor=r.cursor),
    "GET", "/v1/memories")
LIST_DUPLICATES = Operation[DuplicateQuery, DuplicatePage](
    DuplicatePage, lambda on, r: on.service.list_duplicates(on.caller.user(r.user_id), r.project_id, r.limit,
                                                            r.cursor),
    "GET", "/v1/graph/duplicates")


class MemoryBackend(Protocol):
    async def call(self, op: Operation[Req, Resp], req: Req) -> Resp: ...


class ServiceBackend:
    """In the API process: the very objects the REST routes use, for the caller that the MCP request's API key
    authenticated (the same tenant rules as the REST routes)."""

    def __init__(self, service: MemoryService, intake: Intake, caller: Caller) -> None:
        self._on = Local(service, intake, caller)

    async def call(self, op: Operation[Req, Resp], req: Req) -> Resp:
        return await op.local(self._on, req)


class ApiError(ServiceError):
    """The API refused a request (4xx) or failed (5xx); the message is its `detail`."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(detail)
        self.status_code = status_code


def _detail(resp: httpx.Response) -> str:
    try:
        detail: Any = resp.json().get("detail", resp.text)
    except ValueError:
        detail = resp.text
    if isinstance(detail, list):  # FastAPI's 422: a list of pydantic errors
        parts = []
        for err in detail:
            loc = ".".join(str(p) for p in err.get("loc", []) if p not in ("body", "query", "path"))
            parts.append(f"{loc}: {err.get('msg', err)}" if loc else str(err.get("msg", err)))
        detail = "; ".join(parts)
    return f"{detail}" if resp.status_code < 500 else f"memory API error {resp.status_code}: {detail}"


class ApiBackend:
    """In `python -m service.mcp`: each operation is one request to its REST route."""

    def __init__(self, base_url: str, timeout_s: float = 30.0, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s, headers=headers)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(self, op: Operation[Req, Resp], req: Req) -> Resp:
        path, fields = op.route(req)
        query = fields if op.method == "GET" else None
        body = fields if op.method == "POST" else None
        try:
            resp = await self._http.request(op.method, path, params=query, json=body)
        except httpx.TransportError as exc:
            raise DependencyUnavailable(
                f"memory API at {self.base_url} is not reachable ({type(exc).__name__}: {exc}); "
                "start it (./scripts/dev.sh or `python -m service`) or set MEMORY_API_URL"
            ) from exc
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, _detail(resp))
        return op.response.model_validate(resp.json())
