"""The sync client (`MemoryClient`) and its `Accepted` (a write's 202, `wait()` follows the task)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
from pydantic import PrivateAttr

from service.client.call import (
    CANDIDATES,
    FINISHED,
    RETRIES,
    ApiError,
    Call,
    T,
    TaskFailed,
    auth_headers,
    backoff,
    first_id_with,
    id_prefix,
    pick,
    unreachable,
)
from service.client.routes import Routes
from service.runs.schemas import (
    ChatTurn,
    ContextWithLessons,
)
from service.schemas.memories import (
    AcceptedResponse,
    HealthResponse,
    MemoryPage,
    MemoryRecord,
    RawMemoryItem,
)
from service.tasks.status import TaskResponse


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


class MemoryClient:
    """The sync client. `url` defaults to http://127.0.0.1:8199; `transport` is httpx's (tests, proxies)."""

    routes = Routes

    def __init__(self, url: str = "http://127.0.0.1:8199", api_key: str | None = None, *, timeout: float = 30.0,
                 retries: int = RETRIES, transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=auth_headers(api_key),
                                  transport=transport)

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
                    raise unreachable(self.url, exc) from exc
                time.sleep(backoff(attempt))
                continue
            if resp.status_code == 503 and 503 not in call.accept and attempt < self.retries:
                time.sleep(backoff(attempt))
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
            raise unreachable(self.url, exc) from exc

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

    def resolve(self, memory_id: str, *, user_id: str | None = None) -> str:
        """The full id of the user's memory that `memory_id` names: a full id as it is, else the one memory whose id
        starts with it (a short id, as search and the CLI print it); ApiError 404 for none, AmbiguousId for
        several."""
        digits = id_prefix(memory_id)
        if digits is None:
            return memory_id
        page = self.list(user_id=user_id, cursor=first_id_with(digits), limit=CANDIDATES + 1,
                         include_superseded=True, order="id")
        return pick(memory_id, digits, page.memories)

    def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return self.send(Routes.get(self.resolve(memory_id, user_id=user_id), user_id=user_id))

    def update(self, memory_id: str, content: str, *, user_id: str | None = None,
               category: str | None = None) -> Accepted:
        return self._accepted(Routes.update(self.resolve(memory_id, user_id=user_id), content, user_id=user_id,
                                            category=category))

    def delete(self, memory_id: str, *, user_id: str | None = None) -> Accepted:
        return self._accepted(Routes.delete(self.resolve(memory_id, user_id=user_id), user_id=user_id))

    def search(self, query: str, *, user_id: str | None = None, **fields: Any) -> ChatTurn:
        return self.send(Routes.search(query, user_id=user_id, **fields))

    def context(self, project_id: str | None = None, *, user_id: str | None = None) -> ContextWithLessons:
        return self.send(Routes.context(project_id, user_id=user_id))

    def health(self) -> HealthResponse:
        return self.send(Routes.health())

    def optimize(self) -> Accepted:
        return self._accepted(Routes.optimize())

    def import_file(self, data: bytes) -> Accepted:
        return self._accepted(Routes.import_file(data))
