"""A Redis failure as the API's 503 says it (service/core/kv.py `redis_cause`): the cause in the user's terms and
when writes resume; no URL, server message, script hash or Lua line (those stay in the log's message)."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

from service.core.errors import DependencyUnavailable
from service.core.kv import redis_cause, redis_guard
from service.core.settings import RedisQueueSettings

DISK_FULL = ("MISCONF Errors writing to the AOF file: No space left on device script: 58c87e13f0a1b2c3, on "
             "@user_script:6.")


@pytest.mark.parametrize(("error", "says"), [
    (ResponseError(DISK_FULL), "the queue's disk is full"),
    (ResponseError("OOM command not allowed when used memory > 'maxmemory'"), "out of memory"),
    (ReadOnlyError("You can't write against a read only replica."), "changing primaries"),
    (RedisTimeout("Timeout reading from socket"), "did not answer in time"),
    (RedisConnectionError("Error 111 connecting to 127.0.0.1:26379. Connection refused."), "unreachable"),
])
def test_each_cause_in_words(error: Exception, says: str) -> None:
    public = redis_cause(error)
    assert says in public and ("resume" in public or "try again" in public)
    assert "redis://" not in public and "script" not in public and "127.0.0.1" not in public


def test_the_guard_keeps_the_details_for_the_log_and_the_words_for_the_answer() -> None:
    async def disk_full() -> None:
        raise ResponseError(DISK_FULL)

    settings = RedisQueueSettings(REDIS_URL="redis://127.0.0.1:26379")  # type: ignore[call-arg]
    with pytest.raises(DependencyUnavailable) as raised:
        asyncio.run(redis_guard(settings, "enqueue", disk_full()))
    assert "MISCONF" in str(raised.value) and "enqueue" in str(raised.value)  # the log's message
    assert raised.value.public is not None and raised.value.public.startswith("the queue's disk is full")
