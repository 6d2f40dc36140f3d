"""The event-loop monitor (service/core/loop.py): lag that stays high, the worker's back-pressure on it, and the
allowance a dependency's timeout gets while the loop is late."""

from __future__ import annotations

import asyncio
import time

from service.core import loop as loop_mod
from service.core.loop import HIGH_S, SAMPLE_S, WINDOW_S, LoopMonitor, lag_allowance


def test_lag_stays_high_only_when_every_sample_of_the_window_is_high() -> None:
    monitor = LoopMonitor("worker")
    now = time.monotonic() - WINDOW_S
    for i in range(int(WINDOW_S / SAMPLE_S) + 1):
        monitor.record(2.0 if i != 10 else 0.01, now + i * SAMPLE_S)
    assert monitor.sustained() == 0.01  # one quick sample: not "stays high"
    for i in range(int(WINDOW_S / SAMPLE_S) + 1):
        monitor.record(2.0, now + WINDOW_S + i * SAMPLE_S)
    assert monitor.sustained() == 2.0 and monitor.peak == 2.0


def test_a_short_history_is_not_sustained_lag() -> None:
    monitor = LoopMonitor("api")
    monitor.record(5.0)
    assert monitor.sustained() == 0.0 and monitor.recent_peak() == 5.0


def test_the_worker_sheds_jobs_while_the_loop_lags_and_takes_them_back_after() -> None:
    monitor = LoopMonitor("worker")
    assert monitor.concurrency(64) == 64
    now = time.monotonic()
    for i in range(8):  # lagging for 8 s: halved at most once a second
        for j in range(4):
            monitor.record(HIGH_S * 4, now + i + j * SAMPLE_S)
    assert monitor.concurrency(64) == 1
    for i in range(40):  # the loop keeps up again: back to full concurrency
        monitor.record(0.0, now + 9 + i * SAMPLE_S)
    assert monitor.concurrency(64) == 64
    monitor.record(HIGH_S * 4, now + 30)
    assert monitor.concurrency(64) == 32


async def test_a_running_monitor_measures_a_blocked_loop_and_lends_its_lag_to_timeouts() -> None:
    published: list[dict[str, object]] = []

    async def publish(snapshot: dict[str, object]) -> None:
        published.append(snapshot)

    monitor = LoopMonitor("api", publish)
    assert lag_allowance() == 0.0  # no monitor runs
    monitor.start()
    try:
        await asyncio.sleep(SAMPLE_S * 2)
        time.sleep(0.6)  # CPU work on the loop
        await asyncio.sleep(SAMPLE_S * 2)
        assert monitor.peak >= 0.4
        assert lag_allowance() >= 0.4  # a Redis timeout now waits that much longer
    finally:
        await monitor.stop()
    assert loop_mod._running is None and lag_allowance() == 0.0
    assert published == []  # the first publication is PUBLISH_S after the start
