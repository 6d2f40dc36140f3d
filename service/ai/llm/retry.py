"""What the LLM providers share about failed calls: the back-off between retries and the answer that is not the
JSON asked for."""

from __future__ import annotations

import random
from collections.abc import Callable


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
