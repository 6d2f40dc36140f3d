"""The vector index build on demand as a task (`POST /v1/maintenance/optimize`): the API queues an
`optimize` job and answers 202; the worker builds the index (Qdrant Edge: in a child process on a copy, swapped
in; a Qdrant server indexes by itself) and the task's result is the build's report."""

from __future__ import annotations

import time
from typing import Any

import structlog

from service.schemas.maintenance import OptimizeReport
from service.stores.vector import VectorStore
from service.tasks.jobs import OptimizeJob
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)


async def submit_optimize(tasks: TaskQueue) -> str:
    """Queue a build; every request is a new one (a retry with the same Idempotency-Key is not)."""
    return await tasks.enqueue(OptimizeJob(), {"optimize": True, "requested_ns": time.time_ns()})


class IndexBuilder:
    """Worker side of the `optimize` job."""

    def __init__(self, vectors: VectorStore) -> None:
        self.vectors = vectors

    async def run(self, task_id: str, job: OptimizeJob) -> dict[str, Any]:
        backlog = await self.vectors.index_backlog()
        changed = await self.vectors.optimize()
        figures = getattr(self.vectors, "last_optimize", {})
        report = OptimizeReport(backend=self.vectors.name, changed=changed, backlog_before=backlog,
                                backlog_after=await self.vectors.index_backlog(), figures=figures)
        log.info("index_built", task_id=task_id, changed=changed, backlog_before=backlog)
        return report.model_dump(mode="json")
