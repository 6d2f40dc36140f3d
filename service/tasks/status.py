"""A task's status as the queue records it and GET /v1/tasks/{id} answers it (service/tasks/queue.py `status`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from service.core.domain import Progress, TaskStatus


class TaskResponse(BaseModel):
    task_id: str
    status: TaskStatus
    result: dict[str, Any] | None = None
    error: str | None = None
    progress: Progress | None = Field(default=None, description="While a long task (import, dedup, reconcile) "
                                                               "runs: how far it is")
