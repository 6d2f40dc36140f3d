"""Re-embed stored memories with the configured embedder (`python -m service reembed`, POST
/v1/maintenance/reembed), from their stored content, in place.

A run walks the users (one, or every user of the vector store) and each user's memories in id order, a page at a
time: under the memories' locks (an update or delete of the same memory waits), it reads them again, embeds their
content and writes the new vectors. Its position (user, cursor, count) is kept in Redis after every page, so a run
that stops (a worker killed, a job past its time budget) goes on from there: the job that ends its time budget
queues the next part of the run itself, and re-running the command resumes an unfinished run. Search keeps working
meanwhile: the lexical and graph retrievers do not depend on the vectors, and every vector is replaced in place.
A run over every user ends by recording the configured embedder as the collection's (docs/decisions.md, "The local
embedder": what a mismatch at start does).
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from service.ai.embeddings import Embedder
from service.core.keys import reembed_state
from service.core.kv import RedisKV
from service.core.settings import RedisQueueSettings
from service.ledger.ledger import Ledger
from service.ledger.outbox import MemoryLocks
from service.stores.vector import MemoryFilter, VectorStore
from service.tasks.jobs import ReembedJob
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)

PAGE = 64
STATE_TTL_S = 30 * 24 * 3600


def state_name(embedder: Embedder, user_id: str | None) -> str:
    """One resumable run per target embedder and user (or every user)."""
    variant = f"@{embedder.variant}" if embedder.variant else ""
    return reembed_state(f"{embedder.name}{variant}", user_id)


async def submit_reembed(tasks: TaskQueue, kv: RedisKV, embedder: Embedder, user_id: str | None) -> str:
    """The API side: queue a run to `embedder`, or answer the task of the unfinished run to it that is queued or
    running now (two parts of one run never run at once)."""
    name = state_name(embedder, user_id)
    state: dict[str, Any] = await kv.get_json(name) or {}
    active = state.get("task_id")
    if active and not state.get("finished"):
        task = await tasks.records.record(str(active))
        if task is not None and task.get("status") in ("queued", "processing"):
            return str(active)
    task_id = await tasks.enqueue(ReembedJob(user_id=user_id), {"user_id": user_id, "at_ns": time.time_ns()})
    if state.get("finished") or "users" not in state:
        state = {"task_id": task_id}  # a new run: its first part is this task
    else:
        state["task_id"] = task_id  # an unfinished run goes on from its cursor
    await kv.set_json(name, state, STATE_TTL_S)
    return task_id


class Reembedder:
    """The worker side of a run: one part of it (`run`, the job `maintenance_reembed`)."""

    def __init__(self, settings: RedisQueueSettings, tasks: TaskQueue, vectors: VectorStore, embedder: Embedder,
                 locks: MemoryLocks, ledger: Ledger, page: int = PAGE, budget_s: float | None = None) -> None:
        """`vectors` is read (users, pages, the memories as they are now); the new vectors are written through
        the `ledger`. `budget_s`: how long one job works before it queues the next part (default: 40% of
        ARQ_JOB_TIMEOUT, well inside the job's deadline)."""
        self.settings = settings
        self.tasks = tasks
        self.kv = RedisKV(tasks.redis, settings)  # the run's position
        self.vectors = vectors
        self.ledger = ledger
        self.embedder = embedder
        self.locks = locks
        self.page = page
        self.budget_s = max(1.0, settings.job_timeout * 0.4) if budget_s is None else budget_s

    async def run(self, task_id: str, job: ReembedJob) -> dict[str, Any]:
        """Re-embed until done or the time budget is spent (then the next part is queued: `next_task_id`)."""
        name = state_name(self.embedder, job.user_id)
        state: dict[str, Any] | None = await self.kv.get_json(name)
        if state is None or state.get("finished") or "users" not in state:
            everyone = [job.user_id] if job.user_id else sorted({b.user_id for b in await self.vectors.boundaries()})
            total = 0
            for user in everyone:
                total += await self.vectors.count(MemoryFilter(user_id=user, all_scopes=True))
            state = {"users": everyone, "user": 0, "cursor": None, "done": 0, "total": total, "parts": 0,
                     "started_at": time.time(), "finished": False}
        state["parts"] += 1
        state["task_id"] = task_id
        budget_end = time.monotonic() + self.budget_s
        users: list[str] = state["users"]
        for _ in range(10**9):  # bounded by the pages there are; at least one page per part
            if state["user"] >= len(users):
                break
            flt = MemoryFilter(user_id=users[state["user"]], all_scopes=True)
            page, cursor = await self.vectors.scroll(flt, self.page, state["cursor"])
            ids = [m.id for m in page]
            if ids:
                async with self.locks.hold(ids):
                    current = [m for m in await self.vectors.get(ids) if m.content]  # as they are now
                    vectors = await self.embedder.embed([m.content for m in current])
                    await self.ledger.restore_vectors(current, vectors)
                state["done"] += len(current)
            if cursor is None:
                state["user"], state["cursor"] = state["user"] + 1, None
            else:
                state["cursor"] = cursor
            await self.kv.set_json(name, state, STATE_TTL_S)
            await self.tasks.records.set_progress(task_id, state["done"], max(state["total"], state["done"]))
            if time.monotonic() >= budget_end:
                break
        result: dict[str, Any] = {"embedder": self.embedder.name, "variant": self.embedder.variant,
                                  "dim": self.embedder.dim, "user_id": job.user_id, "reembedded": state["done"],
                                  "total": state["total"], "parts": state["parts"]}
        if state["user"] < len(users):
            next_id = await self.tasks.enqueue(ReembedJob(user_id=job.user_id),
                                               {"continues": task_id, "part": state["parts"]})
            state["task_id"] = next_id
            await self.kv.set_json(name, state, STATE_TTL_S)
            log.info("reembed_continues", done=state["done"], total=state["total"], next_task_id=next_id)
            return {**result, "finished": False, "next_task_id": next_id}
        state["finished"] = True
        await self.kv.set_json(name, state, STATE_TTL_S)
        if job.user_id is None:  # every memory now has the configured embedder's vector
            await self.vectors.record_embedder(self.embedder.dim, self.embedder.name, self.embedder.variant)
        log.info("reembed_finished", done=state["done"], parts=state["parts"], user_id=job.user_id)
        return {**result, "finished": True}
