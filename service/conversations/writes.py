"""The worker side of conversations: keep each conversation write's messages under its session (`keep_messages`,
called by the conversation job), erase the messages a memory delete takes with it, drain what a graph outage left
pending, the retention of messages and runs, and a session's delete (`ConversationWriter`, its job).

Deleting erases: a session's delete removes its messages; a memory's delete removes the messages it came from
(their words are the memory's); a delete of everything of a user removes every session
(service/writepath/writes.py `apply_delete`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from service.conversations.jobs import ConversationDeleteJob
from service.core.domain import Memory, Message
from service.core.errors import DependencyUnavailable
from service.core.kv import aw, redis_guard
from service.core.settings import RedisQueueSettings, RetentionSettings
from service.stores.graph import GraphStore
from service.stores.tiers import ConversationStore
from service.tasks.queue import TaskQueue

log = structlog.get_logger(__name__)
PENDING_ERASE = "tiers:pending-erase"
PENDING_MESSAGES = "tiers:pending-messages"


async def keep_messages(settings: RedisQueueSettings, tasks: TaskQueue, graph: ConversationStore, task_id: str,
                        user_id: str,
                        session_id: str | None, project_id: str | None, accepted_at: str, messages: list[Message],
                        memories: list[Memory]) -> str:
    """Store the write's messages under its session (one per write, named by the task id, when none is given),
    each with the memories that came from it. Returns the session id. With the graph down or slow the write does
    not fail (its memories are stored, their graph half waits in the outbox): the messages wait in Redis
    (`<queue>:tiers:pending-messages`) for the reconcile tick (`drain_pending_erasures`)."""
    session = session_id or task_id
    derived: dict[str, list[str]] = {}
    for memory in memories:
        for sid in memory.source_message_ids or []:
            derived.setdefault(sid, []).append(memory.id)
    # a memory names a message by its id, else by its 0-based position (service/memory/windows.py source_id)
    rows = [{"id": m.id, "position": i, "ord": f"{accepted_at}|{i:06d}",
             "role": m.role, "content": m.content, "timestamp": m.timestamp, "task_id": task_id,
             "memory_ids": derived.get(m.id if m.id is not None else str(i), [])} for i, m in enumerate(messages)]
    try:
        stored = await graph.store_messages(user_id, session, project_id, accepted_at, rows)
    except DependencyUnavailable as exc:
        entry = json.dumps({"user_id": user_id, "session": session, "project_id": project_id,
                            "accepted_at": accepted_at, "rows": rows}, sort_keys=True)
        await redis_guard(settings, "pending messages", aw(tasks.redis.sadd(tasks.key(PENDING_MESSAGES), entry)))
        log.warning("messages_pending", session_id=session, error=str(exc)[:300])
        return session
    log.info("messages_kept", session_id=session, messages=stored)
    return session


async def erase_after_delete(settings: RedisQueueSettings, tasks: TaskQueue, graph: GraphStore, user_id: str,
                             memory_ids: list[str], everything: bool, before: str, *, graph_done: bool) -> None:
    """A memory delete erases the messages its memories came from; a delete of everything also the user's runs
    and sessions. When the delete's graph half is pending (the graph is down or slow, the reconciler finishes
    it), so is this: it waits in Redis (`<queue>:tiers:pending-erase`) for `drain_pending_erasures`."""
    if graph_done:
        await graph.conversations.erase_messages_of(user_id, memory_ids)
        if everything:
            await graph.erase_tiers(user_id, before)
        return
    entry = json.dumps({"user_id": user_id, "ids": memory_ids, "everything": everything, "before": before},
                       sort_keys=True)
    await redis_guard(settings, "pending erase", aw(tasks.redis.sadd(tasks.key(PENDING_ERASE), entry)))


async def drain_pending_erasures(settings: RedisQueueSettings, tasks: TaskQueue, graph: GraphStore) -> int:
    """Store the messages conversation writes left pending, then erase what deletes left pending (the reconcile
    tick calls this; in this order, so an erasure follows the messages it erases); stops at a graph failure."""
    key = tasks.key(PENDING_MESSAGES)
    for raw in await redis_guard(settings, "pending messages", aw(tasks.redis.srandmember(key, 100))) or []:
        m = json.loads(raw)
        try:
            await graph.conversations.store_messages(m["user_id"], m["session"], m["project_id"], m["accepted_at"],
                                                     m["rows"])
        except DependencyUnavailable as exc:
            log.warning("pending_messages_wait", error=str(exc)[:300])
            return 0
        await redis_guard(settings, "pending messages", aw(tasks.redis.srem(key, raw)))
    key = tasks.key(PENDING_ERASE)
    entries = await redis_guard(settings, "pending erase", aw(tasks.redis.srandmember(key, 100)))
    done = 0
    for raw in entries or []:
        entry = json.loads(raw)
        try:
            await erase_after_delete(settings, tasks, graph, entry["user_id"], list(entry["ids"]),
                                     bool(entry["everything"]), str(entry["before"]), graph_done=True)
        except DependencyUnavailable as exc:
            log.warning("pending_erase_waits", error=str(exc)[:300])
            break
        await redis_guard(settings, "pending erase", aw(tasks.redis.srem(key, raw)))
        done += 1
    return done


async def expire_tiers(retention: RetentionSettings, graph: GraphStore, user_id: str | None = None) -> dict[str, int]:
    """Retention: erase messages older than MESSAGE_RETENTION_DAYS and runs older than RUN_RETENTION_DAYS (by
    when they were written); a setting of 0 keeps them. `user_id`: only that user's (every user's without)."""
    now = datetime.now(UTC)
    out = {"messages": 0, "runs": 0}
    if retention.message_retention_days > 0:
        before = (now - timedelta(days=retention.message_retention_days)).isoformat()
        out["messages"] = await graph.conversations.expire_messages(before, user_id)
    if retention.run_retention_days > 0:
        before = (now - timedelta(days=retention.run_retention_days)).isoformat()
        out["runs"] = await graph.runs.expire_runs(before, user_id)
    log.info("tier_retention", **out)
    return out


class ConversationWriter:
    def __init__(self, graph: ConversationStore) -> None:
        self.graph = graph

    async def delete_session(self, task_id: str, job: ConversationDeleteJob) -> dict[str, Any]:
        deleted = await self.graph.delete_session(job.user_id, job.session_id, job.accepted_at)
        return {"session_id": job.session_id, "deleted": deleted > 0, "graph": "stored"}
