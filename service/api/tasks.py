"""Task polling for every kind of task (memory writes, imports, maintenance runs, index builds, run traces):
`GET /v1/tasks/{task_id}`. `GET /v1/memories/status/{task_id}` is the seed's alias of it."""

from __future__ import annotations

from fastapi import APIRouter

from service import routes
from service.api.declared import on
from service.api.deps import MemoriesDep
from service.api.errors import responses
from service.api.params import TaskId
from service.api.security import CallerDep
from service.tasks.status import TaskResponse

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


@on(router, routes.TASK, responses=responses(404))
async def task(task_id: TaskId, memories: MemoriesDep, caller: CallerDep) -> TaskResponse:
    """A task's state (queued, processing, completed, failed), its `progress` while a long one runs, and its
    `result` or `error`. A task of another user is unknown (404)."""
    return await memories.task_status(task_id, caller.user_filter(None))
