"""Which errors a job retries (transient) and which end its task failed at once."""

from __future__ import annotations

import pytest
from neo4j.exceptions import ClientError, ServiceUnavailable, SessionExpired, TransientError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from service.core.errors import DependencyUnavailable, DomainError
from service.writepath.outbox import MemoryBusy
from worker.jobs import backoff, deadline, is_transient


@pytest.mark.parametrize("exc", [
    DependencyUnavailable("qdrant 503"), TimeoutError(), TransientError("deadlock"), ServiceUnavailable("down"),
    SessionExpired("gone"), RedisConnectionError("refused"), ConnectionResetError(), MemoryBusy("locked"),
])
def test_transient_errors_are_retried(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize("exc", [
    ClientError("bad cypher"), ValueError("bad scope"), KeyError("x"), RuntimeError("embedder broke"),
    DomainError("rule"), ResponseError("WRONGTYPE"), AssertionError(),
])
def test_other_errors_fail_the_task(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_backoff_and_deadline() -> None:
    assert [backoff(a) for a in (1, 2, 3, 6)] == [2, 4, 8, 30]
    assert deadline(300) == 290 and deadline(30) == 27 and deadline(1) == 1
