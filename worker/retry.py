"""How a job waits on a slow dependency (worker/jobs.py): the backoff between its attempts, the dependency a
transient error names, and when the task first met one (the retry budget's start)."""

from __future__ import annotations

import random
import time
from collections import OrderedDict

from redis.exceptions import RedisError

from service.ledger.outbox import MemoryBusy
from service.stores.failures import TRANSIENT_STORE_ERRORS

MAX_BACKOFF_S = 60.0


def backoff(attempt: int, first_s: float) -> float:
    """`first_s` (WRITE_RETRY_BACKOFF_SECONDS), doubled per attempt (2, 4, 8 ... seconds by default), at most
    MAX_BACKOFF_S, with a tenth of jitter so retried jobs do not come back together."""
    base = min(first_s * 2.0 ** (attempt - 1), MAX_BACKOFF_S)
    return base * random.uniform(0.9, 1.1)


_DEPENDENCIES = (("redis", "Redis"), ("neo4j", "Neo4j"), ("qdrant", "the vector store"),
                 ("vector", "the vector store"), ("embedder", "the embedder"),
                 ("extractor", "the extractor process"), ("gemini", "the LLM"),
                 ("openai", "the LLM"), ("llm", "the LLM"))


def dependency_of(exc: BaseException) -> str:
    """Which dependency a transient error waited on, in a user's words (the task's `retry.dependency`)."""
    for cause in _chain(exc):
        if isinstance(cause, RedisError):
            return "Redis"
        if isinstance(cause, TRANSIENT_STORE_ERRORS):
            return "Neo4j"
        if isinstance(cause, MemoryBusy):
            return "another job's lock on the same memory"
        text = f"{type(cause).__name__} {cause}".lower()
        for word, name in _DEPENDENCIES:
            if word in text:
                return name
    return "a dependency (timeout)"


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(out) < 8:
        out.append(cause)
        cause = cause.__cause__ or cause.__context__
    return out


class RetryClock:
    """When each task of this process first failed transiently: the budget's start when Redis cannot say (the task
    record's `retry.since` is the shared one). Bounded: the oldest entries go first."""

    MAX = 100_000

    def __init__(self) -> None:
        self._since: OrderedDict[str, float] = OrderedDict()

    def first(self, task_id: str, since: float | None = None) -> float:
        """The earliest failure known of the task (the record's `since`, when read, or this process's)."""
        known = self._since.get(task_id)
        first = min(x for x in (known, since, time.time()) if x is not None)
        self._since[task_id] = first
        while len(self._since) > self.MAX:
            self._since.popitem(last=False)
        return first

    def forget(self, task_id: str) -> None:
        self._since.pop(task_id, None)
