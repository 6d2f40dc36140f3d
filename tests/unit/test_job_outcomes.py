"""Which errors a job retries (transient) and which end its task failed at once."""

from __future__ import annotations

import pytest
from neo4j.exceptions import ClientError, ServiceUnavailable, SessionExpired, TransientError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from service.core.errors import DependencyUnavailable, DomainError
from service.ledger.outbox import MemoryBusy
from worker.jobs import deadline, is_transient
from worker.retry import RetryClock, backoff, dependency_of


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
    for attempt, base in ((1, 2), (2, 4), (3, 8), (6, 60), (30, 60)):  # doubling, at most a minute, a tenth of jitter
        waits = {backoff(attempt, 2.0) for _ in range(20)}
        assert all(base * 0.9 <= w <= base * 1.1 for w in waits) and len(waits) > 1
    assert all(0.45 <= backoff(1, 0.5) <= 0.55 and 0.9 <= backoff(2, 0.5) <= 1.1 for _ in range(20))
    assert 54 <= backoff(9, 0.5) <= 66  # the ceiling holds for any first wait
    assert deadline(300) == 290 and deadline(30) == 27 and deadline(1) == 1


@pytest.mark.parametrize(("exc", "named"), [
    (DependencyUnavailable("redis unavailable (status update) at redis://localhost:6379: Timeout"), "Redis"),
    (RedisConnectionError("refused"), "Redis"),
    (DependencyUnavailable("neo4j unavailable: connection refused"), "Neo4j"),
    (ServiceUnavailable("down"), "Neo4j"),
    (DependencyUnavailable("qdrant at http://q:6333 unreachable during upsert"), "the vector store"),
    (DependencyUnavailable("the embedder process exited"), "the embedder"),
    (MemoryBusy("locked"), "another job's lock on the same memory"),
    (TimeoutError(), "a dependency (timeout)"),
])
def test_a_retry_names_the_dependency_it_waits_on(exc: BaseException, named: str) -> None:
    assert dependency_of(exc) == named


def test_a_wrapped_error_is_named_by_its_cause() -> None:
    try:
        try:
            raise RedisConnectionError("Connection reset by peer")
        except RedisConnectionError as inner:
            raise TimeoutError("step timed out") from inner
    except TimeoutError as outer:
        assert dependency_of(outer) == "Redis"


def test_the_retry_clock_keeps_the_earliest_failure() -> None:
    clock = RetryClock()
    first = clock.first("t1")
    assert clock.first("t1") == first  # later failures keep the first
    assert clock.first("t1", since=first - 100) == first - 100  # the record knows an earlier one (another process)
    clock.forget("t1")
    assert clock.first("t1") >= first
