"""A job's bookkeeping after its writes (clearing its outbox entry, its final record) outlasts a slow moment of
Redis in place: the real Redis stops serving writes for 1.2 s (`CLIENT PAUSE ... WRITE`) with a 0.5 s timeout.
Without the in-place tries the step fails, ARQ reruns the whole job, and a job whose last try fails so is marked
failed with its memories stored (seen in a soak at load 15-30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.core.errors import DependencyUnavailable
from service.core.kv import aw, redis_guard
from service.core.redis_client import connect_redis
from service.ledger.outbox import Intent, Outbox
from service.tasks.functions import FUNCTIONS
from service.tasks.queue import TaskQueue
from tests.conftest import make_settings, unique

PAUSE_MS = 1200


async def test_outbox_clear_and_the_final_record_outlast_a_paused_redis(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, redis_timeout_seconds=0.5)
    redis = await connect_redis(settings.redis)
    try:
        outbox, tasks = Outbox(redis, settings.redis), TaskQueue(redis, settings.redis, FUNCTIONS)
        entry = unique("task")
        await outbox.put(Intent(op="remove", task_id=entry, user_id="u", memory_ids=["m1"]))
        assert [i.task_id for i in await outbox.due(0, 10)] == [entry]

        # The pause is real: one guarded write within the timeout fails.
        await aw(redis.client_pause(PAUSE_MS, all=False))  # WRITE mode
        with pytest.raises(DependencyUnavailable):
            await redis_guard(settings.redis, "probe", redis.set(unique("probe"), "1"))
        await aw(redis.client_unpause())

        await aw(redis.client_pause(PAUSE_MS, all=False))  # WRITE mode
        await outbox.clear(entry)  # times out once or twice, then lands
        assert await outbox.due(0, 10) == []

        task_id = unique("t")
        await tasks.records.mark_processing(task_id, 1)
        await aw(redis.client_pause(PAUSE_MS, all=False))  # WRITE mode
        await tasks.records.mark_completed(task_id, {"memories": [{"id": "m1"}]})
        record = await tasks.records.record(task_id)
        assert record is not None and record["status"] == "completed"
    finally:
        await aw(redis.client_unpause())
        await redis.aclose()
