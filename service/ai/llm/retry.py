"""What the LLM providers share about failed calls: the retry loop of one HTTP request, the back-off between
retries and the answer that is not the JSON asked for."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from service.core.metrics import LLM_CALLS

T = TypeVar("T")


class Malformed(Exception):
    """The model answered, but not with the JSON the request asked for."""


class Backoff:
    """Exponential with jitter: base * 2^(n-1) * [0.5, 1], capped; the server's own hint (`hint_s` of the error: a
    Retry-After, a RetryInfo) raises the floor."""

    def __init__(self, base_delay_s: float, max_delay_s: float,
                 hint_s: Callable[[BaseException], float | None] | None = None) -> None:
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.hint_s = hint_s

    def delay(self, failures: int, exc: BaseException | None = None) -> float:
        raw = min(self.max_delay_s, self.base_delay_s * 2.0 ** max(0, failures - 1))
        delay = raw * (0.5 + random.random() / 2)
        hint = self.hint_s(exc) if exc is not None and self.hint_s is not None else None
        if hint is not None:
            delay = min(self.max_delay_s, max(delay, hint))
        return delay


async def call_with_retries(
    request: Callable[[], Awaitable[T]],
    *,
    errors: tuple[type[BaseException], ...],
    classify: Callable[[BaseException], tuple[int | None, str, bool]],
    rejected: Callable[[BaseException, str, int | None, str], Exception],
    unavailable: Callable[[int, str, int | None, str], Exception],
    model: str,
    max_retries: int,
    backoff: Backoff,
    timeout_s: float,
    event: str,
    stage: str,
    log: Any,
    limiter: asyncio.Semaphore | None = None,
    **fields: Any,
) -> tuple[T, int, int]:
    """Run one HTTP request, retrying transient failures -> (result, attempt, latency_ms).

    A provider says what a failure is: `classify(exc)` -> (code, status, transient). A failure that is not transient
    raises `rejected(exc, what, code, status)` at once; the last of 1 + max_retries transient ones raises
    `unavailable(attempts, what, code, status)`. `limiter` bounds the requests in flight; it is not held while
    backing off, and the latency counts from when it is acquired."""
    attempt = 0
    while True:
        attempt += 1
        started = time.perf_counter()
        try:
            if limiter is None:
                result = await asyncio.wait_for(request(), timeout=timeout_s)
            else:
                async with limiter:
                    started = time.perf_counter()
                    result = await asyncio.wait_for(request(), timeout=timeout_s)
        except errors as exc:
            latency_ms = round((time.perf_counter() - started) * 1000)
            code, status, transient = classify(exc)
            what = f"{code} {status}" if code is not None else status
            LLM_CALLS.labels(stage, model, "retried" if transient and attempt <= max_retries else "failed").inc()
            log.warning(f"{event}_failed", model=model, attempt=attempt, code=code, status=status,
                        latency_ms=latency_ms, transient=transient, error=str(exc)[:300], **fields)
            if not transient:
                raise rejected(exc, what, code, status) from exc
            if attempt > max_retries:
                raise unavailable(attempt, what, code, status) from exc
            await asyncio.sleep(backoff.delay(attempt, exc))
            continue
        LLM_CALLS.labels(stage, model, "ok").inc()
        return result, attempt, round((time.perf_counter() - started) * 1000)
