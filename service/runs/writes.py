"""The worker side of task traces: a RunJob's part of a run (the task and the summary embedded first, never inside
the graph transaction), and a run's delete. Each part MERGEs what it carries (service/stores/neo4j/runs.py), so
parts may run in any order; a read orders steps by `seq` and a step's tool calls by their `seq`, else by the order
the API accepted them in."""

from __future__ import annotations

import uuid
from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.core.domain import ID_NAMESPACE
from service.core.kv import RedisKV, redis_guard
from service.core.settings import RedisQueueSettings
from service.runs.jobs import RunDeleteJob, RunJob, accepted_marker, vector_model
from service.stores.tiers import RunWrite, RunWriteStore
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)


class RunWriter:
    def __init__(self, settings: RedisQueueSettings, tasks: TaskQueue, kv: RedisKV, graph: RunWriteStore,
                 embedder: Embedder) -> None:
        self.settings = settings
        self.tasks = tasks
        self.kv = kv  # the accepted-run marker a delete drops
        self.graph = graph
        self.embedder = embedder

    async def store_run(self, task_id: str, job: RunJob) -> dict[str, Any]:
        run_id = job.run_id or task_id
        task = job.start.task if job.start else ""
        summary = job.outcome.summary if job.outcome else ""
        wanted = [t for t in (task, summary) if t]  # embedded here, never inside the graph transaction
        vectors = iter(await self.embedder.embed(wanted)) if wanted else iter(())
        task_vec = next(vectors) if task else None
        summary_vec = next(vectors) if summary else None
        steps = []
        for step in job.steps:
            calls = []
            for n, call in enumerate(step.tool_calls):
                call_id = uuid.uuid5(ID_NAMESPACE, f"call|{task_id}|{step.seq}|{n}").hex
                calls.append({**call.model_dump(mode="json"), "id": call_id, "n": n, "accepted_at": job.accepted_at})
            steps.append({"seq": step.seq, "action": step.action, "thought": step.thought, "tool_calls": calls})
        written = await self.graph.write_run(RunWrite(
            user_id=job.user_id, run_id=run_id, accepted_at=job.accepted_at,
            start=job.start.model_dump(mode="json") if job.start else None, steps=steps,
            outcome=job.outcome.model_dump(mode="json") if job.outcome else None,
            task_vec=task_vec, summary_vec=summary_vec, vec_model=vector_model(self.embedder)))
        log.info("run_written", run_id=run_id, steps=len(steps), written=written is not None)
        return {"run_id": run_id, "run_url": f"/v1/runs/{run_id}", "graph": "stored" if written else "skipped",
                **(written.summary() if written is not None
                   else {"reason": "the run was deleted after this write was accepted"})}

    async def delete_run(self, task_id: str, job: RunDeleteJob) -> dict[str, Any]:
        deleted = await self.graph.delete_run(job.user_id, job.run_id, job.accepted_at)
        marker = self.kv.key(accepted_marker(job.user_id, job.run_id))
        await redis_guard(self.settings, "run marker", self.tasks.redis.delete(marker))
        return {"run_id": job.run_id, "deleted": deleted, "graph": "stored"}
