"""A task's status as the queue records it and GET /v1/tasks/{id} answers it (service/tasks/queue.py `status`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from service.core.domain import Progress, TaskStatus


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
    result: dict[str, Any] | None = None
    error: str | None = None
    progress: Progress | None = Field(default=None, description="While a long task (import, dedup, reconcile) "
                                                               "runs: how far it is")
    retry: RetryState | None = Field(default=None, description="While the task waits on a slow or absent dependency "
                                                                "(status `retrying`, and after it while it runs "
                                                                "again): why, and when it runs next")
