"""Where the MCP tools send each operation: one method per operation, one line per method.

`ServiceBackend` calls the API process's `MemoryService` (the HTTP transport, mounted in the API).
`ApiBackend` calls the REST route that wraps the same `MemoryService` method (the stdio server, a
separate process that must not open the embedded Qdrant shard the API owns). Neither holds any
logic of its own: validation, scope rules, queueing and search all live in the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from service.errors import DependencyUnavailable, ServiceError
from service.schemas import (
    AcceptedResponse,
    BulkDeleteRequest,
    ContextResponse,
    ConversationRequest,
    DuplicatePage,
    EntityChange,
    GraphSearchRequest,
    GraphSearchResponse,
    MemoryPage,
    MergeRequest,
    RawBatchRequest,
    RawMemoryRequest,
    ReviewRequest,
    SearchRequest,
    SearchResponse,
    TaskResponse,
)

if TYPE_CHECKING:
    from service.auth import Caller
    from service.memory import MemoryService
    from service.memory.intake import Intake

ModelT = TypeVar("ModelT", bound=BaseModel)


class MemoryBackend(Protocol):
    async def search(self, req: SearchRequest) -> SearchResponse: ...

    async def submit_raw(self, req: RawMemoryRequest) -> AcceptedResponse: ...

    async def submit_raw_batch(self, req: RawBatchRequest) -> AcceptedResponse: ...

    async def submit_conversation(self, req: ConversationRequest) -> AcceptedResponse: ...

    async def task_status(self, task_id: str) -> TaskResponse: ...

    async def context(self, user_id: str, project_id: str | None) -> ContextResponse: ...

    async def graph_search(self, req: GraphSearchRequest) -> GraphSearchResponse: ...

    async def list_memories(
        self,
        user_id: str,
        *,
        scope: str | None,
        category: str | None,
        project_id: str | None,
        agent_id: str | None,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage: ...

    async def submit_bulk_delete(self, req: BulkDeleteRequest) -> AcceptedResponse: ...

    async def list_duplicates(self, user_id: str, project_id: str | None, limit: int,
                              cursor: str | None) -> DuplicatePage: ...

    async def review_duplicate(self, req: ReviewRequest) -> EntityChange: ...

    async def merge_entities(self, req: MergeRequest) -> EntityChange: ...


class ServiceBackend:
    """In the API process: the very `MemoryService` the REST routes use, for the caller that the MCP
    request's API key authenticated (the same tenant rules as the REST routes)."""

    def __init__(self, service: MemoryService, intake: Intake, caller: Caller) -> None:
        self._service = service
        self._intake = intake
        self._caller = caller

    async def search(self, req: SearchRequest) -> SearchResponse:
        return await self._service.search(req, self._caller.user(req.user_id))

    async def submit_raw(self, req: RawMemoryRequest) -> AcceptedResponse:
        return await self._intake.submit_raw(req, self._caller.user(req.user_id))

    async def submit_raw_batch(self, req: RawBatchRequest) -> AcceptedResponse:
        return await self._intake.submit_raw_batch(req, self._caller.user(req.user_id))

    async def submit_conversation(self, req: ConversationRequest) -> AcceptedResponse:
        return await self._intake.submit_conversation(req, self._caller.user(req.user_id))

    async def task_status(self, task_id: str) -> TaskResponse:
        return await self._service.task_status(task_id, self._caller.user_filter(None))

    async def context(self, user_id: str, project_id: str | None) -> ContextResponse:
        return await self._service.context(self._caller.user(user_id), project_id)

    async def graph_search(self, req: GraphSearchRequest) -> GraphSearchResponse:
        return await self._service.graph_search(req, self._caller.user(req.user_id))

    async def list_memories(
        self,
        user_id: str,
        *,
        scope: str | None,
        category: str | None,
        project_id: str | None,
        agent_id: str | None,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage:
        return await self._service.list_memories(
            self._caller.user(user_id), scope=scope, category=category, project_id=project_id, agent_id=agent_id,
            limit=limit, cursor=cursor,
        )

    async def submit_bulk_delete(self, req: BulkDeleteRequest) -> AcceptedResponse:
        return await self._intake.submit_bulk_delete(req, self._caller.user(req.user_id))

    async def list_duplicates(self, user_id: str, project_id: str | None, limit: int,
                              cursor: str | None) -> DuplicatePage:
        return await self._service.list_duplicates(self._caller.user(user_id), project_id, limit, cursor)

    async def review_duplicate(self, req: ReviewRequest) -> EntityChange:
        return await self._service.review_duplicate(req, self._caller.user(req.user_id))

    async def merge_entities(self, req: MergeRequest) -> EntityChange:
        return await self._service.merge_entities(req, self._caller.user(req.user_id))


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
    """In `python -m service.mcp`: each operation is one request to the REST route of the same name."""

    def __init__(self, base_url: str, timeout_s: float = 30.0, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s, headers=headers)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, model: type[ModelT], method: str, url: str, **kwargs: Any) -> ModelT:
        try:
            resp = await self._http.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            raise DependencyUnavailable(
                f"memory API at {self.base_url} is not reachable ({type(exc).__name__}: {exc}); "
                "start it (./scripts/dev.sh or `python -m service`) or set MEMORY_API_URL"
            ) from exc
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, _detail(resp))
        return model.model_validate(resp.json())

    @staticmethod
    def _body(req: BaseModel) -> dict[str, Any]:
        return req.model_dump(mode="json", exclude_none=True)

    async def search(self, req: SearchRequest) -> SearchResponse:
        return await self._call(SearchResponse, "POST", "/v1/search", json=self._body(req))

    async def submit_raw(self, req: RawMemoryRequest) -> AcceptedResponse:
        return await self._call(AcceptedResponse, "POST", "/v1/memories/raw", json=self._body(req))

    async def submit_raw_batch(self, req: RawBatchRequest) -> AcceptedResponse:
        return await self._call(AcceptedResponse, "POST", "/v1/memories/raw/batch", json=self._body(req))

    async def submit_conversation(self, req: ConversationRequest) -> AcceptedResponse:
        return await self._call(AcceptedResponse, "POST", "/v1/memories", json=self._body(req))

    async def task_status(self, task_id: str) -> TaskResponse:
        return await self._call(TaskResponse, "GET", f"/v1/memories/status/{quote(task_id, safe='')}")

    async def context(self, user_id: str, project_id: str | None) -> ContextResponse:
        where = quote(project_id, safe="") if project_id else "global"
        return await self._call(ContextResponse, "GET", f"/v1/context/{where}", params={"user_id": user_id})

    async def graph_search(self, req: GraphSearchRequest) -> GraphSearchResponse:
        return await self._call(GraphSearchResponse, "POST", "/v1/graph/search", json=self._body(req))

    async def list_memories(
        self,
        user_id: str,
        *,
        scope: str | None,
        category: str | None,
        project_id: str | None,
        agent_id: str | None,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage:
        params = {"user_id": user_id, "scope": scope, "category": category, "project_id": project_id,
                  "agent_id": agent_id, "limit": limit, "cursor": cursor}
        return await self._call(
            MemoryPage, "GET", "/v1/memories", params={k: v for k, v in params.items() if v is not None}
        )

    async def submit_bulk_delete(self, req: BulkDeleteRequest) -> AcceptedResponse:
        return await self._call(AcceptedResponse, "POST", "/v1/memories/delete", json=self._body(req))

    async def list_duplicates(self, user_id: str, project_id: str | None, limit: int,
                              cursor: str | None) -> DuplicatePage:
        params = {"user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor}
        return await self._call(DuplicatePage, "GET", "/v1/graph/duplicates",
                                params={k: v for k, v in params.items() if v is not None})

    async def review_duplicate(self, req: ReviewRequest) -> EntityChange:
        return await self._call(EntityChange, "POST", "/v1/graph/duplicates/review", json=self._body(req))

    async def merge_entities(self, req: MergeRequest) -> EntityChange:
        return await self._call(EntityChange, "POST", "/v1/graph/entities/merge", json=self._body(req))
