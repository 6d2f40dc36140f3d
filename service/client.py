"""A typed Python client of the memory API: `MemoryClient` (sync) and `AsyncMemoryClient` (async), docs/client.md.

    from service.client import MemoryClient
    with MemoryClient("http://127.0.0.1:8199", api_key=None) as mem:
        mem.add("I prefer tabs", category="preference", user_id="me").wait()
        hits = mem.search("indentation", user_id="me").results

- Every route is one `Call` built by `Routes` (its method, path, query, body and answer model): the one definition
  both clients send. Each client has a method per route (`mem.search(...)`, `await amem.search(...)`) and `send`.
- Answers are the API's pydantic models (service/schemas); a write answers `Accepted`, whose `wait()` follows the
  task to its end (`/v1/tasks/{id}`) and returns its status.
- Transport errors and 503 are retried (RETRIES times, backoff) with the same `Idempotency-Key`: every
  state-changing call carries one (a fresh one per call unless given), so a write retried after a dropped
  connection is stored once.
- Every error answer is raised as `ApiError` with `status`, `code`, `detail` (and `errors` of a 422); a server
  that cannot be reached is `ApiError` with status 0 and code `unreachable`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, PrivateAttr, TypeAdapter

from service.conversations.schemas import (
    MessagePage,
    MessageSearchRequest,
    MessageSearchResponse,
    SessionPage,
    SessionSummary,
)
from service.runs.schemas import (
    CompleteRequest,
    RunAccepted,
    RunOut,
    RunPage,
    RunRequest,
    RunSearchRequest,
    RunSearchResponse,
    RunStats,
    SearchWithReasoning,
    StepRequest,
    ToolCallRequest,
)
from service.schemas import (
    AcceptedResponse,
    BulkDeleteRequest,
    CategoryOut,
    ContextResponse,
    ConversationRequest,
    DedupAccepted,
    DedupRequest,
    DedupRunReport,
    DuplicatePage,
    EntityChange,
    GraphPage,
    GraphSearchRequest,
    GraphSearchResponse,
    GraphStats,
    HealthResponse,
    MaintenanceRunPage,
    MemoryPage,
    MemoryRecord,
    MergeRequest,
    RawBatchRequest,
    RawMemoryItem,
    RawMemoryRequest,
    ReconcileAccepted,
    ReconcileRequest,
    ReembedRequest,
    ReviewRequest,
    SearchRequest,
    TaskResponse,
    TraceOut,
    TracePage,
    UnmergeRequest,
    UpdateMemoryRequest,
)
from service.schemas.graph_api import (
    CommunityPage,
    CommunityRebuild,
    EntityFactsPage,
    EntityWrite,
    FactPage,
    FactWrite,
    GraphQuery,
    RelationWrite,
)

T = TypeVar("T")
RETRIES = 4  # retries after the first attempt, for transport errors and 503
BACKOFF_S = 0.25  # doubled per retry, at most MAX_BACKOFF_S
MAX_BACKOFF_S = 4.0
FINISHED = ("completed", "failed")
__all__ = ["Accepted", "ApiError", "AsyncAccepted", "AsyncMemoryClient", "Call", "MemoryClient", "Routes"]


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

    @property
    def writes(self) -> bool:
        return self.method in ("POST", "PUT", "DELETE", "PATCH") and not (
            self.path.endswith("/search") or self.path == "/v1/graph/query")

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


def _user(user_id: str | None) -> dict[str, Any]:
    return {"user_id": user_id}


class Routes:
    """Every route of the API as a `Call` (the one place paths, parameters and answer models are written)."""

    # --- memories -------------------------------------------------------------------------------------------
    @staticmethod
    def add(content: str, *, category: str, user_id: str | None = None, **fields: Any) -> Call[AcceptedResponse]:
        body = RawMemoryRequest(content=content, category=category, user_id=user_id, **fields)
        return Call("POST", "/v1/memories/raw", AcceptedResponse, body=body)

    @staticmethod
    def add_batch(memories: list[RawMemoryItem | dict[str, Any]], *, user_id: str | None = None
                  ) -> Call[AcceptedResponse]:
        items = [m if isinstance(m, RawMemoryItem) else RawMemoryItem.model_validate(m) for m in memories]
        return Call("POST", "/v1/memories/raw/batch", AcceptedResponse,
                    body=RawBatchRequest(memories=items, user_id=user_id))

    @staticmethod
    def add_conversation(messages: list[dict[str, Any]], *, user_id: str | None = None, **fields: Any
                         ) -> Call[AcceptedResponse]:
        body = ConversationRequest.model_validate({"messages": messages, "user_id": user_id, **fields})
        return Call("POST", "/v1/memories", AcceptedResponse, body=body)

    @staticmethod
    def add_legacy(messages: list[dict[str, Any]], *, user_id: str | None = None, **fields: Any
                   ) -> Call[AcceptedResponse]:
        body = ConversationRequest.model_validate({"messages": messages, "user_id": user_id, **fields})
        return Call("POST", "/memories/async", AcceptedResponse, body=body)

    @staticmethod
    def task(task_id: str) -> Call[TaskResponse]:
        return Call("GET", f"/v1/tasks/{task_id}", TaskResponse)

    @staticmethod
    def memory_status(task_id: str) -> Call[TaskResponse]:
        return Call("GET", f"/v1/memories/status/{task_id}", TaskResponse)

    @staticmethod
    def legacy_status(task_id: str) -> Call[TaskResponse]:
        return Call("GET", f"/memories/status/{task_id}", TaskResponse)

    @staticmethod
    def memories(*, user_id: str | None = None, scope: str | None = None, category: str | None = None,
             project_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
             cursor: str | None = None) -> Call[MemoryPage]:
        return Call("GET", "/v1/memories", MemoryPage, params={
            "user_id": user_id, "scope": scope, "category": category, "project_id": project_id,
            "agent_id": agent_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def get(memory_id: str, *, user_id: str | None = None) -> Call[MemoryRecord]:
        return Call("GET", f"/v1/memories/{memory_id}", MemoryRecord, params=_user(user_id))

    @staticmethod
    def update(memory_id: str, content: str, *, user_id: str | None = None, category: str | None = None
               ) -> Call[AcceptedResponse]:
        body = UpdateMemoryRequest(content=content, user_id=user_id, category=category)
        return Call("PUT", f"/v1/memories/{memory_id}", AcceptedResponse, body=body)

    @staticmethod
    def delete(memory_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("DELETE", f"/v1/memories/{memory_id}", AcceptedResponse, params=_user(user_id))

    @staticmethod
    def delete_many(*, user_id: str | None = None, **fields: Any) -> Call[AcceptedResponse]:
        body = BulkDeleteRequest.model_validate({"user_id": user_id, **fields})
        return Call("POST", "/v1/memories/delete", AcceptedResponse, body=body)

    # --- reads ---------------------------------------------------------------------------------------------
    @staticmethod
    def search(query: str, *, user_id: str | None = None, **fields: Any) -> Call[SearchWithReasoning]:
        body = SearchRequest.model_validate({"query": query, "user_id": user_id, **fields})
        return Call("POST", "/v1/search", SearchWithReasoning, body=body)

    @staticmethod
    def context(project_id: str | None = None, *, user_id: str | None = None) -> Call[ContextResponse]:
        return Call("GET", f"/v1/context/{project_id or 'global'}", ContextResponse, params=_user(user_id))

    @staticmethod
    def context_markdown(project_id: str | None = None, *, user_id: str | None = None,
                         max_chars: int | None = None) -> Call[str]:
        return Call("GET", f"/v1/context/{project_id or 'global'}", None,
                    params={"user_id": user_id, "format": "markdown", "max_chars": max_chars})

    @staticmethod
    def categories() -> Call[list[CategoryOut]]:
        return Call("GET", "/v1/categories", list[CategoryOut])

    @staticmethod
    def health() -> Call[HealthResponse]:
        return Call("GET", "/health", HealthResponse, accept=(503,))

    @staticmethod
    def metrics() -> Call[str]:
        return Call("GET", "/metrics", None)

    # --- graph -----------------------------------------------------------------------------------------------
    @staticmethod
    def graph_search(query: str, *, user_id: str | None = None, **fields: Any) -> Call[GraphSearchResponse]:
        body = GraphSearchRequest.model_validate({"query": query, "user_id": user_id, **fields})
        return Call("POST", "/v1/graph/search", GraphSearchResponse, body=body)

    @staticmethod
    def graph(kind: str, *, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
              cursor: str | None = None, **extra: Any) -> Call[GraphPage]:
        """kind: nodes, edges or episodes."""
        return Call("GET", f"/v1/graph/{kind}", GraphPage, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor, **extra})

    @staticmethod
    def graph_stats(*, user_id: str | None = None, project_id: str | None = None) -> Call[GraphStats]:
        return Call("GET", "/v1/graph/stats", GraphStats, params={"user_id": user_id, "project_id": project_id})

    @staticmethod
    def duplicates(*, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
                   cursor: str | None = None) -> Call[DuplicatePage]:
        return Call("GET", "/v1/graph/duplicates", DuplicatePage, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def review(source_id: str, target_id: str, confirm: bool, *, user_id: str | None = None) -> Call[EntityChange]:
        body = ReviewRequest(source_id=source_id, target_id=target_id, confirm=confirm, user_id=user_id)
        return Call("POST", "/v1/graph/duplicates/review", EntityChange, body=body)

    @staticmethod
    def merge(source_id: str, target_id: str, *, user_id: str | None = None) -> Call[EntityChange]:
        body = MergeRequest(source_id=source_id, target_id=target_id, user_id=user_id)
        return Call("POST", "/v1/graph/entities/merge", EntityChange, body=body)

    @staticmethod
    def unmerge(entity_id: str, *, user_id: str | None = None) -> Call[EntityChange]:
        return Call("POST", f"/v1/graph/entities/{entity_id}/unmerge", EntityChange,
                    body=UnmergeRequest(user_id=user_id))

    # --- the graph as an API (docs/graph.md) ------------------------------------------------------------------
    @staticmethod
    def add_entity(body: EntityWrite) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/entities", AcceptedResponse, body=body)

    @staticmethod
    def add_relation(body: RelationWrite) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/relations", AcceptedResponse, body=body)

    @staticmethod
    def add_fact(body: FactWrite) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/facts", AcceptedResponse, body=body)

    @staticmethod
    def facts(*, name: str | None = None, entity_id: str | None = None, user_id: str | None = None,
              project_id: str | None = None, include_history: bool | None = None, limit: int | None = None,
              cursor: str | None = None) -> Call[EntityFactsPage]:
        return Call("GET", "/v1/graph/facts", EntityFactsPage, params={
            "name": name, "entity_id": entity_id, "user_id": user_id, "project_id": project_id,
            "include_history": include_history, "limit": limit, "cursor": cursor})

    @staticmethod
    def entity_facts(entity_id: str, *, user_id: str | None = None, include_history: bool | None = None,
                     limit: int | None = None, cursor: str | None = None) -> Call[EntityFactsPage]:
        return Call("GET", f"/v1/graph/entities/{entity_id}/facts", EntityFactsPage, params={
            "user_id": user_id, "include_history": include_history, "limit": limit, "cursor": cursor})

    @staticmethod
    def query_graph(body: GraphQuery) -> Call[FactPage]:
        return Call("POST", "/v1/graph/query", FactPage, body=body)

    @staticmethod
    def communities(*, user_id: str | None = None, limit: int | None = None, cursor: str | None = None
                    ) -> Call[CommunityPage]:
        return Call("GET", "/v1/graph/communities", CommunityPage,
                    params={"user_id": user_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def rebuild_communities(*, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/graph/communities/rebuild", AcceptedResponse, body=CommunityRebuild(user_id=user_id))

    @staticmethod
    def traces(*, user_id: str | None = None, entity_id: str | None = None, limit: int | None = None,
               cursor: str | None = None) -> Call[TracePage]:
        return Call("GET", "/v1/traces", TracePage, params={
            "user_id": user_id, "entity_id": entity_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def trace(trace_id: str, *, user_id: str | None = None) -> Call[TraceOut]:
        return Call("GET", f"/v1/traces/{trace_id}", TraceOut, params=_user(user_id))

    # --- export, import, maintenance -------------------------------------------------------------------------
    @staticmethod
    def export(*, user_id: str | None = None, project_id: str | None = None, include_vectors: bool = False
               ) -> Call[str]:
        return Call("GET", "/v1/export", None, params={
            "user_id": user_id, "project_id": project_id, "include_vectors": include_vectors or None})

    @staticmethod
    def import_file(data: bytes) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/import", AcceptedResponse, content=data)

    @staticmethod
    def dedup(*, user_id: str | None = None, dry_run: bool = False) -> Call[DedupAccepted]:
        return Call("POST", "/v1/maintenance/dedup", DedupAccepted, body=DedupRequest(user_id=user_id,
                                                                                       dry_run=dry_run))

    @staticmethod
    def reconcile(*, user_id: str | None = None, dry_run: bool = False) -> Call[ReconcileAccepted]:
        return Call("POST", "/v1/maintenance/reconcile", ReconcileAccepted,
                    body=ReconcileRequest(user_id=user_id, dry_run=dry_run))

    @staticmethod
    def reembed(*, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("POST", "/v1/maintenance/reembed", AcceptedResponse, body=ReembedRequest(user_id=user_id))

    @staticmethod
    def optimize() -> Call[AcceptedResponse]:
        return Call("POST", "/v1/maintenance/optimize", AcceptedResponse)

    @staticmethod
    def maintenance_runs(*, limit: int | None = None, cursor: str | None = None) -> Call[MaintenanceRunPage]:
        return Call("GET", "/v1/maintenance/runs", MaintenanceRunPage, params={"limit": limit, "cursor": cursor})

    @staticmethod
    def maintenance_run(run_id: str) -> Call[DedupRunReport]:
        return Call("GET", f"/v1/maintenance/runs/{run_id}", DedupRunReport)

    # --- task traces (runs) and conversations ----------------------------------------------------------------
    @staticmethod
    def start_run(req: RunRequest) -> Call[RunAccepted]:
        return Call("POST", "/v1/runs", RunAccepted, body=req)

    @staticmethod
    def runs(*, user_id: str | None = None, session_id: str | None = None, project_id: str | None = None,
             limit: int | None = None, cursor: str | None = None) -> Call[RunPage]:
        return Call("GET", "/v1/runs", RunPage, params={"user_id": user_id, "session_id": session_id,
                                                         "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def search_runs(req: RunSearchRequest) -> Call[RunSearchResponse]:
        return Call("POST", "/v1/runs/search", RunSearchResponse, body=req)

    @staticmethod
    def run_stats(*, user_id: str | None = None, project_id: str | None = None) -> Call[RunStats]:
        return Call("GET", "/v1/runs/stats", RunStats, params={"user_id": user_id, "project_id": project_id})

    @staticmethod
    def run(run_id: str, *, user_id: str | None = None) -> Call[RunOut]:
        return Call("GET", f"/v1/runs/{run_id}", RunOut, params=_user(user_id))

    @staticmethod
    def delete_run(run_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("DELETE", f"/v1/runs/{run_id}", AcceptedResponse, params=_user(user_id))

    @staticmethod
    def add_step(run_id: str, req: StepRequest) -> Call[AcceptedResponse]:
        return Call("POST", f"/v1/runs/{run_id}/steps", AcceptedResponse, body=req)

    @staticmethod
    def add_tool_call(run_id: str, seq: int, req: ToolCallRequest) -> Call[AcceptedResponse]:
        return Call("POST", f"/v1/runs/{run_id}/steps/{seq}/tool-calls", AcceptedResponse, body=req)

    @staticmethod
    def complete_run(run_id: str, req: CompleteRequest) -> Call[AcceptedResponse]:
        return Call("POST", f"/v1/runs/{run_id}/complete", AcceptedResponse, body=req)

    @staticmethod
    def sessions(*, user_id: str | None = None, project_id: str | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Call[SessionPage]:
        return Call("GET", "/v1/conversations", SessionPage, params={
            "user_id": user_id, "project_id": project_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def search_messages(req: MessageSearchRequest) -> Call[MessageSearchResponse]:
        return Call("POST", "/v1/conversations/search", MessageSearchResponse, body=req)

    @staticmethod
    def messages(session_id: str, *, user_id: str | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Call[MessagePage]:
        return Call("GET", f"/v1/conversations/{session_id}", MessagePage,
                    params={"user_id": user_id, "limit": limit, "cursor": cursor})

    @staticmethod
    def summary(session_id: str, *, user_id: str | None = None, sentences: int | None = None
                ) -> Call[SessionSummary]:
        return Call("GET", f"/v1/conversations/{session_id}/summary", SessionSummary,
                    params={"user_id": user_id, "sentences": sentences})

    @staticmethod
    def delete_session(session_id: str, *, user_id: str | None = None) -> Call[AcceptedResponse]:
        return Call("DELETE", f"/v1/conversations/{session_id}", AcceptedResponse, params=_user(user_id))


def _backoff(attempt: int) -> float:
    return float(min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempt))


def _unreachable(url: str, exc: Exception) -> ApiError:
    return ApiError(0, "unreachable", f"the memory API at {url} is not reachable ({type(exc).__name__}: {exc}); "
                                      "start it (./scripts/dev.sh or python -m service) or set MEMORY_API_URL")


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class Accepted(AcceptedResponse):
    """A write's 202; `wait()` follows its task (sync client)."""

    _client: MemoryClient | None = PrivateAttr(default=None)

    def wait(self, timeout: float = 300.0, poll: float = 0.2, raise_on_failure: bool = False) -> TaskResponse:
        assert self._client is not None
        deadline = time.monotonic() + timeout
        while True:
            task = self._client.task(self.task_id)
            if task.status in FINISHED or time.monotonic() >= deadline:
                break
            time.sleep(poll)
        if raise_on_failure and task.status == "failed":
            raise TaskFailed(200, "task_failed", task.error or "the task failed")
        return task


class AsyncAccepted(AcceptedResponse):
    """A write's 202; `await wait()` follows its task (async client)."""

    _client: AsyncMemoryClient | None = PrivateAttr(default=None)

    async def wait(self, timeout: float = 300.0, poll: float = 0.2,  # noqa: ASYNC109 (a polling bound)
                   raise_on_failure: bool = False) -> TaskResponse:
        assert self._client is not None
        deadline = time.monotonic() + timeout
        while True:
            task = await self._client.task(self.task_id)
            if task.status in FINISHED or time.monotonic() >= deadline:
                break
            await asyncio.sleep(poll)
        if raise_on_failure and task.status == "failed":
            raise TaskFailed(200, "task_failed", task.error or "the task failed")
        return task


class MemoryClient:
    """The sync client. `url` defaults to http://127.0.0.1:8199; `transport` is httpx's (tests, proxies)."""

    routes = Routes

    def __init__(self, url: str = "http://127.0.0.1:8199", api_key: str | None = None, *, timeout: float = 30.0,
                 retries: int = RETRIES, transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=_headers(api_key), transport=transport)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call[T]) -> T:
        key = call.idempotency_key or (uuid.uuid4().hex if call.writes else None)
        for attempt in range(self.retries + 1):
            try:
                resp = self._http.request(call.method, call.path, **call.request(key))
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise _unreachable(self.url, exc) from exc
                time.sleep(_backoff(attempt))
                continue
            if resp.status_code == 503 and 503 not in call.accept and attempt < self.retries:
                time.sleep(_backoff(attempt))
                continue
            return call.read(resp)
        raise AssertionError("unreachable")  # the loop returns or raises

    def stream(self, call: Call[Any]) -> Iterator[bytes]:
        """The answer's bytes as they come (the export); errors as `send`'s, not retried."""
        try:
            with self._http.stream(call.method, call.path, **call.request(None)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise ApiError.of(resp)
                yield from resp.iter_bytes()
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc

    def _accepted(self, call: Call[AcceptedResponse]) -> Accepted:
        out = Accepted.model_validate(self.send(call).model_dump())
        out._client = self
        return out

    # memories
    def add(self, content: str, *, category: str, user_id: str | None = None, **fields: Any) -> Accepted:
        return self._accepted(Routes.add(content, category=category, user_id=user_id, **fields))

    def add_batch(self, memories: list[RawMemoryItem | dict[str, Any]], *, user_id: str | None = None) -> Accepted:
        return self._accepted(Routes.add_batch(memories, user_id=user_id))

    def add_conversation(self, messages: list[dict[str, Any]], *, user_id: str | None = None,
                         **fields: Any) -> Accepted:
        return self._accepted(Routes.add_conversation(messages, user_id=user_id, **fields))

    def task(self, task_id: str) -> TaskResponse:
        return self.send(Routes.task(task_id))

    def list(self, **filters: Any) -> MemoryPage:
        return self.send(Routes.memories(**filters))

    def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return self.send(Routes.get(memory_id, user_id=user_id))

    def update(self, memory_id: str, content: str, *, user_id: str | None = None,
               category: str | None = None) -> Accepted:
        return self._accepted(Routes.update(memory_id, content, user_id=user_id, category=category))

    def delete(self, memory_id: str, *, user_id: str | None = None) -> Accepted:
        return self._accepted(Routes.delete(memory_id, user_id=user_id))

    def search(self, query: str, *, user_id: str | None = None, **fields: Any) -> SearchWithReasoning:
        return self.send(Routes.search(query, user_id=user_id, **fields))

    def context(self, project_id: str | None = None, *, user_id: str | None = None) -> ContextResponse:
        return self.send(Routes.context(project_id, user_id=user_id))

    def health(self) -> HealthResponse:
        return self.send(Routes.health())

    def optimize(self) -> Accepted:
        return self._accepted(Routes.optimize())

    def import_file(self, data: bytes) -> Accepted:
        return self._accepted(Routes.import_file(data))


class AsyncMemoryClient:
    """The async client: the same calls as `MemoryClient`, awaited."""

    routes = Routes

    def __init__(self, url: str = "http://127.0.0.1:8199", api_key: str | None = None, *, timeout: float = 30.0,
                 retries: int = RETRIES, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, headers=_headers(api_key),
                                       transport=transport)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call[T]) -> T:
        key = call.idempotency_key or (uuid.uuid4().hex if call.writes else None)
        for attempt in range(self.retries + 1):
            try:
                resp = await self._http.request(call.method, call.path, **call.request(key))
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise _unreachable(self.url, exc) from exc
                await asyncio.sleep(_backoff(attempt))
                continue
            if resp.status_code == 503 and 503 not in call.accept and attempt < self.retries:
                await asyncio.sleep(_backoff(attempt))
                continue
            return call.read(resp)
        raise AssertionError("unreachable")

    async def _accepted(self, call: Call[AcceptedResponse]) -> AsyncAccepted:
        out = AsyncAccepted.model_validate((await self.send(call)).model_dump())
        out._client = self
        return out

    async def add(self, content: str, *, category: str, user_id: str | None = None, **fields: Any) -> AsyncAccepted:
        return await self._accepted(Routes.add(content, category=category, user_id=user_id, **fields))

    async def add_batch(self, memories: list[RawMemoryItem | dict[str, Any]], *,
                        user_id: str | None = None) -> AsyncAccepted:
        return await self._accepted(Routes.add_batch(memories, user_id=user_id))

    async def add_conversation(self, messages: list[dict[str, Any]], *, user_id: str | None = None,
                               **fields: Any) -> AsyncAccepted:
        return await self._accepted(Routes.add_conversation(messages, user_id=user_id, **fields))

    async def task(self, task_id: str) -> TaskResponse:
        return await self.send(Routes.task(task_id))

    async def list(self, **filters: Any) -> MemoryPage:
        return await self.send(Routes.memories(**filters))

    async def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return await self.send(Routes.get(memory_id, user_id=user_id))

    async def update(self, memory_id: str, content: str, *, user_id: str | None = None,
                     category: str | None = None) -> AsyncAccepted:
        return await self._accepted(Routes.update(memory_id, content, user_id=user_id, category=category))

    async def delete(self, memory_id: str, *, user_id: str | None = None) -> AsyncAccepted:
        return await self._accepted(Routes.delete(memory_id, user_id=user_id))

    async def search(self, query: str, *, user_id: str | None = None, **fields: Any) -> SearchWithReasoning:
        return await self.send(Routes.search(query, user_id=user_id, **fields))

    async def context(self, project_id: str | None = None, *, user_id: str | None = None) -> ContextResponse:
        return await self.send(Routes.context(project_id, user_id=user_id))

    async def health(self) -> HealthResponse:
        return await self.send(Routes.health())

    async def optimize(self) -> AsyncAccepted:
        return await self._accepted(Routes.optimize())

    async def import_file(self, data: bytes) -> AsyncAccepted:
        return await self._accepted(Routes.import_file(data))
