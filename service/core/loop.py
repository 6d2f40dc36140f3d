"""Event-loop lag: how late this process's loop wakes a task that asked to sleep SAMPLE_S (docs/write-path.md
"Slowness is not an outage").

A starved CPU (a build beside the service, a CPU quota, a shared VM) or CPU work on the loop makes every await wait
for the loop as well as for the dependency: a 1.5 s Redis timeout then measures the process's backlog, not Redis.
The monitor keeps the recent samples, and three things read them:

- `lag_allowance()`: what a dependency's timeout adds while this loop is late (service/core/kv.py `redis_guard`), so a
  timeout fires because the dependency was slow, not because the loop was;
- `concurrency()`: the worker's back-pressure: fewer jobs at once while the loop lags (halved at most once a second
  while a sample is over HIGH_S), back up by a quarter a sample once it is under LOW_S (worker/claiming.py);
- /health, through `publish`: each process writes its lag to Redis every PUBLISH_S (service/memory/health.py).

One monitor per process and loop, started with the process's clients (service/deps.py) and stopped with them; the
module keeps the running one so that `lag_allowance()` needs no client handed down to every Redis call.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from service.core.metrics import LOOP_LAG, LOOP_LAG_SAMPLES, WORKER_JOBS_ALLOWED

log = structlog.get_logger(__name__)

SAMPLE_S = 0.25
WINDOW_S = 15.0  # lag "stays high" when every sample of this window is over the threshold
PUBLISH_S = 5.0
HIGH_S = 0.5  # a sample over this halves the worker's jobs in flight (at most once a second)
LOW_S = 0.1  # a sample under this raises them by a quarter
ALLOWANCE_CAP_S = 60.0
MIN_FACTOR = 1 / 256

_running: LoopMonitor | None = None


def lag_allowance() -> float:
    """Seconds a dependency's timeout adds now: the worst lag of this loop in the last few seconds (0 when no monitor
    runs in this process, e.g. a CLI)."""
    monitor = _running
    return min(ALLOWANCE_CAP_S, monitor.recent_peak()) if monitor is not None else 0.0


class LoopMonitor:
    def __init__(self, role: str, publish: Callable[[dict[str, Any]], Awaitable[None]] | None = None) -> None:
        """`role`: "api" or "worker" (the metric's label); `publish(snapshot())`: where the figures go every
        PUBLISH_S (Redis, for /health); its failures are logged, never raised."""
        self.role = role
        self._publish = publish
        self.jobs_running = 0  # the worker's jobs in flight (note_jobs), and the most at once since start
        self.jobs_peak = 0
        self._samples: deque[tuple[float, float]] = deque(maxlen=int(WINDOW_S / SAMPLE_S) + 1)
        self.peak = 0.0  # the worst sample since start (the starve bench reads it from the log)
        self.factor = 1.0  # the worker's share of its max_jobs (concurrency())
        self._lowered_at = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        global _running
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"loop-monitor-{self.role}")
            _running = self

    async def stop(self) -> None:
        global _running
        if _running is self:
            _running = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def record(self, lag: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._samples.append((now, lag))
        self.peak = max(self.peak, lag)
        LOOP_LAG.labels(self.role).set(lag)
        LOOP_LAG_SAMPLES.labels(self.role).observe(lag)
        if lag > HIGH_S:
            if now - self._lowered_at >= 1.0:
                self.factor = max(MIN_FACTOR, self.factor / 2)
                self._lowered_at = now
        elif lag < LOW_S:
            self.factor = min(1.0, self.factor * 1.25)

    def recent_peak(self, window_s: float = 5.0) -> float:
        since = time.monotonic() - window_s
        return max((lag for at, lag in self._samples if at >= since), default=0.0)

    def sustained(self) -> float:
        """The smallest sample of the last WINDOW_S (0 until the window has filled): high only when it stays high."""
        if not self._samples or self._samples[-1][0] - self._samples[0][0] < WINDOW_S * 0.9:
            return 0.0
        return min(lag for _, lag in self._samples)

    def concurrency(self, max_jobs: int) -> int:
        """Jobs the worker may run at once now: max_jobs while the loop keeps up, fewer while it lags (at least 1)."""
        allowed = max(1, math.ceil(max_jobs * self.factor))
        WORKER_JOBS_ALLOWED.set(allowed)
        return allowed

    def note_jobs(self, running: int) -> None:
        self.jobs_running = running
        self.jobs_peak = max(self.jobs_peak, running)

    def snapshot(self) -> dict[str, Any]:
        """What /health shows of this process: lag that stayed high, the worst lately and since start, jobs."""
        return {"role": self.role, "pid": os.getpid(), "lag_s": round(self.sustained(), 3),
                "recent_peak_s": round(self.recent_peak(PUBLISH_S), 3), "peak_s": round(self.peak, 3),
                "jobs_running": self.jobs_running, "jobs_peak": self.jobs_peak,
                "jobs_allowed_share": round(self.factor, 4)}

    async def _run(self) -> None:
        published = time.monotonic()
        for _ in range(10**12):  # bounded; cancelled by stop()
            started = time.monotonic()
            await asyncio.sleep(SAMPLE_S)
            now = time.monotonic()
            self.record(max(0.0, now - started - SAMPLE_S), now)
            if self._publish is not None and now - published >= PUBLISH_S:
                published = now
                try:
                    await self._publish(self.snapshot())
                except Exception as exc:  # Redis slow or away: the next turn tries again
                    log.warning("loop_lag_publish_failed", error=f"{type(exc).__name__}: {exc}"[:200])


def describe(snapshot: dict[str, Any]) -> str:
    """One process's published figures for a person (the CLI's stats, the console's health page): "worker 825: lag
    0.0 s (peak 0.063 s), jobs 0 (peak 1)"."""
    return (f"{snapshot.get('role')} {snapshot.get('pid')}: lag {snapshot.get('lag_s')} s (peak "
            f"{snapshot.get('peak_s')} s), jobs {snapshot.get('jobs_running')} (peak {snapshot.get('jobs_peak')})")
