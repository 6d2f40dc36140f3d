"""A task's status as the queue records it and GET /v1/tasks/{id} answers it (service/tasks/queue.py `status`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from service.core.domain import MemoryOut, Progress, TaskStatus


class TaskResult(BaseModel):
    """What a finished task did: typed where kinds of task share a field (`memories` of a write, `deleted` of a
    delete, `graph`), every other field as the task wrote it (`extractor`, `usage`, `resolution`, ...). Answered
    exactly as stored: a field the task did not write is not added."""

    model_config = ConfigDict(extra="allow")

    memories: list[MemoryOut] | None = Field(default=None, description="A write's stored memories, in order")
    deleted: list[str] | bool | int | None = Field(default=None, description=(
        "A delete's memory ids (a session's or a run's delete: whether it or how many)"))
    graph: str | None = Field(default=None, description="stored, or pending when the graph write is still queued")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set or k in (self.model_extra or {})}


class RetryState(BaseModel):
    """Why a task waits to run again (status `retrying`), and since when: a slow or absent dependency delays a write,
    it does not end it, until WRITE_RETRY_BUDGET_SECONDS have passed since `since`."""

    dependency: str = Field(description="What was slow or away: Redis, Neo4j, the vector store, the LLM, ...")
    reason: str = Field(description="The error it answered with")
    attempt: int = Field(description="The attempt that met it (1 = the first)")
    since: str = Field(description="When the task first met a slow or absent dependency (ISO 8601)")
    next_at: str = Field(description="When it runs again (ISO 8601)")


class TaskResponse(BaseModel):
    task_id: str
    status: TaskStatus
    result: TaskResult | None = None
    error: str | None = None
    progress: Progress | None = Field(default=None, description="While a long task (import, dedup, reconcile) "
                                                               "runs: how far it is")
    retry: RetryState | None = Field(default=None, description="While the task waits on a slow or absent dependency "
                                                                "(status `retrying`, and after it while it runs "
                                                                "again): why, and when it runs next")
