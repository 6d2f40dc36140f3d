"""Reads of memories and of write tasks: one memory, a listing, a task's status (the caller's sensitivity ceiling
applied to its result)."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from service.core.domain import ListOrder, listing_order
from service.core.sensitivity import redact
from service.memory.rules import StoredMemories, existing, list_filter
from service.schemas.memories import MemoryPage, MemoryRecord
from service.tasks.status import TaskResponse, TaskResult


class TaskStatuses(Protocol):
    async def status(self, task_id: str, owner: str | None = None) -> TaskResponse: ...


class MemoryReads:
    def __init__(self, vectors: StoredMemories, tasks: TaskStatuses) -> None:
        self.vectors = vectors
        self.tasks = tasks

    async def get_memory(self, memory_id: str, user_id: str | None) -> MemoryRecord:
        [memory] = await existing(self.vectors, [memory_id], user_id)
        return MemoryRecord.of(memory)

    async def task_status(self, task_id: str, owner: str | None) -> TaskResponse:
        """A task's status; a task of another user than `owner` (when given) is unknown (404)."""
        status = await self.tasks.status(task_id, owner)
        # A write's result lists its memories and what the graph made of them: when one is above the caller's
        # sensitivity ceiling, only the memories within it are told (the entities and facts may be its words).
        written = status.result.model_dump(mode="json") if status.result is not None else None
        kept = redact(written)
        if kept == written:
            return status
        memories = (kept or {}).get("memories") or []
        return status.model_copy(update={"result": TaskResult.model_validate({"memories": memories,
                                                                              "redacted": True})})

    async def list_memories(
        self,
        user_id: str,
        *,
        scope: str | None = None,
        category: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        include_superseded: bool = False,
        order: ListOrder | None = None,
    ) -> MemoryPage:
        flt = list_filter(user_id, scope, category, project_id, agent_id, all_scopes=True)
        if not include_superseded:  # superseded preferences are history (service/memory/preferences.py)
            flt = replace(flt, active_only=True)
        page, next_cursor = await self.vectors.scroll(flt, limit, cursor, listing_order(order, cursor))
        return MemoryPage(memories=[MemoryRecord.of(m) for m in page], next_cursor=next_cursor)
