"""The load client's resend rule (scripts/bench/common.py `fetch_retrying`, used by soak.py and scale_out.py),
against a real local HTTP server (aiohttp's)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from scripts.bench.common import fetch_retrying
from tests.unit.conftest import serving


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, dict[str, int]]]:
    """/busy answers 503 twice, then 202; /down drops the connection every time (a POST: aiohttp resends an
    idempotent request once itself); /bad answers 400."""
    hits = {"busy": 0, "down": 0, "bad": 0}

    async def busy(_: web.Request) -> web.Response:
        hits["busy"] += 1
        return web.Response(status=503 if hits["busy"] <= 2 else 202, text=str(hits["busy"]))

    async def down(request: web.Request) -> web.Response:
        hits["down"] += 1
        assert request.transport is not None
        request.transport.close()  # the client sees the server disconnect
        return web.Response(text="never sent")

    async def bad(_: web.Request) -> web.Response:
        hits["bad"] += 1
        return web.Response(status=400, text="no")

    app = web.Application()
    app.add_routes([web.post("/busy", busy), web.post("/down", down), web.get("/bad", bad)])
    async with serving(app) as url:
        yield url, hits


async def test_a_status_to_retry_is_sent_again_until_another_answer(server: tuple[str, dict[str, int]]) -> None:
    url, hits = server
    resends = []
    async with aiohttp.ClientSession(url) as client:
        answer = await fetch_retrying(client, "POST", "/busy", tries=5, pause_s=lambda _: 0.0,
                                      retry_statuses=(503,), on_retry=lambda: resends.append(1))
    assert (answer.status_code, answer.text, hits["busy"], len(resends)) == (202, "3", 3, 2)


async def test_the_last_try_answers_whatever_it_got(server: tuple[str, dict[str, int]]) -> None:
    url, hits = server
    async with aiohttp.ClientSession(url) as client:
        answer = await fetch_retrying(client, "POST", "/busy", tries=2, pause_s=lambda _: 0.0, retry_statuses=(503,))
    assert (answer.status_code, hits["busy"]) == (503, 2)


async def test_other_answers_are_not_sent_again(server: tuple[str, dict[str, int]]) -> None:
    url, hits = server
    async with aiohttp.ClientSession(url) as client:
        answer = await fetch_retrying(client, "GET", "/bad", tries=5, pause_s=lambda _: 0.0, retry_statuses=(503,))
    assert (answer.status_code, hits["bad"]) == (400, 1)


async def test_a_transport_error_to_retry_is_raised_after_the_last_try(server: tuple[str, dict[str, int]]) -> None:
    url, hits = server
    resends = []
    async with aiohttp.ClientSession(url) as client:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await fetch_retrying(client, "POST", "/down", tries=3, pause_s=lambda _: 0.0,
                                 retry_errors=(aiohttp.ServerDisconnectedError,), on_retry=lambda: resends.append(1))
    assert (hits["down"], len(resends)) == (3, 2)


async def test_a_transport_error_not_named_is_raised_at_once(server: tuple[str, dict[str, int]]) -> None:
    url, hits = server
    async with aiohttp.ClientSession(url) as client:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await fetch_retrying(client, "POST", "/down", tries=3, pause_s=lambda _: 0.0, retry_statuses=(503,))
    assert hits["down"] == 1
