"""The async client (`AsyncMemoryClient`) and its `AsyncAccepted` (a write's 202, `await wait()` follows the task)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
from pydantic import PrivateAttr

from service.client.call import (
    CANDIDATES,
    FINISHED,
    RETRIES,
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


class AsyncMemoryClient:
    """The async client: the same calls as `MemoryClient`, awaited."""

    routes = Routes

    def __init__(self, url: str = "http://127.0.0.1:8199", api_key: str | None = None, *, timeout: float = 30.0,
                 retries: int = RETRIES, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, headers=auth_headers(api_key),
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
                    raise unreachable(self.url, exc) from exc
                await asyncio.sleep(backoff(attempt))
                continue
            if resp.status_code == 503 and 503 not in call.accept and attempt < self.retries:
                await asyncio.sleep(backoff(attempt))
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

    async def resolve(self, memory_id: str, *, user_id: str | None = None) -> str:
        """As MemoryClient.resolve: a short id (a unique prefix) becomes the full id."""
        digits = id_prefix(memory_id)
        if digits is None:
            return memory_id
        page = await self.list(user_id=user_id, cursor=first_id_with(digits), limit=CANDIDATES + 1,
                               include_superseded=True, order="id")
        return pick(memory_id, digits, page.memories)

    async def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryRecord:
        return await self.send(Routes.get(await self.resolve(memory_id, user_id=user_id), user_id=user_id))

    async def update(self, memory_id: str, content: str, *, user_id: str | None = None,
                     category: str | None = None) -> AsyncAccepted:
        return await self._accepted(Routes.update(await self.resolve(memory_id, user_id=user_id), content,
                                                  user_id=user_id, category=category))

    async def delete(self, memory_id: str, *, user_id: str | None = None) -> AsyncAccepted:
        return await self._accepted(Routes.delete(await self.resolve(memory_id, user_id=user_id), user_id=user_id))

    async def search(self, query: str, *, user_id: str | None = None, **fields: Any) -> ChatTurn:
        return await self.send(Routes.search(query, user_id=user_id, **fields))

    async def context(self, project_id: str | None = None, *, user_id: str | None = None) -> ContextWithLessons:
        return await self.send(Routes.context(project_id, user_id=user_id))

    async def health(self) -> HealthResponse:
        return await self.send(Routes.health())

    async def optimize(self) -> AsyncAccepted:
        return await self._accepted(Routes.optimize())

    async def import_file(self, data: bytes) -> AsyncAccepted:
        return await self._accepted(Routes.import_file(data))
