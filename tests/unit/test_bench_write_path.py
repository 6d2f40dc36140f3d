"""write_path.py's load: the open loop counts a write's wait for a free connection in its latency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from scripts.bench.write_path import Run, accept_all
from tests.unit.conftest import serving

SERVICE_S = 0.04  # each accept takes at least this long, one at a time (one connection)


@pytest.fixture
async def slow_api() -> AsyncIterator[str]:
    async def accept(request: web.Request) -> web.Response:
        await request.json()
        await asyncio.sleep(SERVICE_S)
        return web.json_response({"task_id": "t"}, status=202)

    app = web.Application()
    app.router.add_post("/v1/memories/raw", accept)
    async with serving(app) as url:
        yield url


async def _latencies(url: str, rate: float | None) -> Run:
    run = Run()
    bodies = [{"content": f"fact {i}", "category": "preference"} for i in range(5)]
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=1)) as client:
        await accept_all(client, run, "/v1/memories/raw", bodies, clients=1, rate=rate)
    return run


async def test_open_loop_latency_runs_from_when_the_write_was_due(slow_api: str) -> None:
    # 100/s over one connection that answers at most 25/s: the fifth write is due at 40 ms and answered
    # no earlier than 200 ms, so its latency is at least 160 ms (minus the first one's head start)
    open_loop = await _latencies(slow_api, rate=100.0)
    closed = await _latencies(slow_api, rate=None)
    assert len(open_loop.task_ids) == len(closed.task_ids) == 5 and not open_loop.errors
    assert all(ms >= SERVICE_S * 1000 for ms in open_loop.latencies_ms + closed.latencies_ms)
    assert max(open_loop.latencies_ms) >= 5 * SERVICE_S * 1000 - 40 - 5
    # a closed loop sends the next write when the last is answered: its latencies are one service time each
    assert max(closed.latencies_ms) < max(open_loop.latencies_ms)
