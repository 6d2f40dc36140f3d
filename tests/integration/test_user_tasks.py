"""The per-user task index (`<queue>:utasks:<user>`), written by the accept script with the task record: newest
first, bounded, expiring like the records, one entry per accepted task (a retried request adds none), nothing for a
job of no user, and no task of another user."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import service.tasks.queue as queue_module
from service.core.redis_client import connect_redis
from service.graph_api.jobs import CommunityJob
from service.tasks.functions import FUNCTIONS
from service.tasks.jobs import RawJob
from service.tasks.queue import TaskQueue
from tests.conftest import make_settings, unique


@pytest.fixture
async def tasks(tmp_path: Path) -> AsyncIterator[TaskQueue]:
    settings = make_settings(tmp_path, arq_queue_name=unique("test:utasks"))
    redis = await connect_redis(settings.redis)
    try:
        yield TaskQueue(redis, settings.redis, FUNCTIONS)
    finally:
        keys = [k async for k in redis.scan_iter(match=settings.redis.queue_name + "*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()


def _job(user: str, content: str) -> RawJob:
    return RawJob(user_id=user, scope="user", category="preference", content=content)


async def test_recent_lists_the_users_tasks_newest_first_within_the_bound(
        tasks: TaskQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_module, "USER_TASKS_KEPT", 3)
    user, other = unique("ut"), unique("ut")
    ids = [await tasks.enqueue(_job(user, f"note {i}"), {"n": i}, user_id=user) for i in range(4)]
    theirs = await tasks.enqueue(_job(other, "their note"), {"n": "other"}, user_id=other)
    again = await tasks.enqueue(_job(user, "note 3"), {"n": 3}, user_id=user)  # a retry: the same task
    assert again == ids[3]

    recent = await tasks.records.recent(user)
    assert [t["task_id"] for t in recent] == ids[:0:-1]  # the newest 3; the oldest trimmed
    assert all(t["kind"] == "raw" and t["status"] == "queued" and t["error"] is None for t in recent)
    assert "job" not in recent[0] and "result" not in recent[0]
    assert [t["task_id"] for t in await tasks.records.recent(other)] == [theirs]
    assert [t["task_id"] for t in await tasks.records.recent(user, limit=1)] == [ids[3]]

    index = tasks.keys.user_tasks(user)
    ttl = await tasks.redis.ttl(index)
    assert 0 < ttl <= tasks._settings.task_ttl_seconds
    # an ended task shows its status and error; a record that expired is left out
    await tasks.records.mark_failed(ids[2], "boom: the job could not be stored")
    await tasks.redis.delete(tasks.key(f"task:{ids[1]}"))
    recent = await tasks.records.recent(user)
    assert [(t["task_id"], t["status"], t["error"]) for t in recent] == [
        (ids[3], "queued", None), (ids[2], "failed", "boom: the job could not be stored")]


async def test_a_job_of_no_user_writes_no_index(tasks: TaskQueue) -> None:
    await tasks.enqueue(CommunityJob(user_id=None), {"n": unique("none")})  # every user's rebuild
    assert [k async for k in tasks.redis.scan_iter(match=tasks.key("utasks:*"))] == []
    assert await tasks.records.recent("") == []
