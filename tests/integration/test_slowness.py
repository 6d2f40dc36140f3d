"""Slowness is not an outage (docs/write-path.md): a write that meets a slow or absent dependency waits and says so
(`retrying`, with the dependency, the attempt and when it runs next) instead of failing after three tries; a fault that
outlasts WRITE_RETRY_BUDGET_SECONDS fails it with a reason that names the dependency and the time waited; a failure
whose record Redis cannot take now is recorded when Redis answers; a Redis pause longer than the old three tries ends
with every write completed. The LLM is the local fake OpenAI-compatible server, reached by the real `openai` client;
Redis is paused for real (CLIENT PAUSE)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scripts.bench.procs import SlowProxy
from service.core.kv import aw
from tests.conftest import unique
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.conftest import running_app, wait_task

MODEL = "llama3.1:8b"
FACTS = {"facts": [{"content": "The user lives in Porto.", "category": "personal_fact", "scope": "global",
                    "entities": [{"name": "Porto", "type": "place", "role": None}], "relations": [],
                    "valid_at": None, "source_messages": [0]}]}
CHAT = [{"role": "user", "content": "We moved to Porto last weekend."}]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.respond_with(FACTS)
        yield server


def llm(base_url: str, **overrides: Any) -> dict[str, Any]:
    """One model, no fallback: each attempt fails in a few seconds (the client's own retries), so the job's retries
    are what the test waits through, 0.5 s doubling between them (WRITE_RETRY_BACKOFF_SECONDS)."""
    return {"llm_provider": "openai", "openai_base_url": base_url, "llm_model": MODEL, "llm_timeout_seconds": 5,
            "write_retry_backoff_seconds": 0.5, **overrides}


def down(fake: FakeOpenAI) -> None:
    """Every chat call answers 503, until `fake.reset()`."""
    fake.script(MODEL, [503] * 10_000)


async def status(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/memories/status/{task_id}")
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


async def test_an_llm_down_past_three_tries_delays_the_write_and_says_retrying(tmp_path: Path,
                                                                                fake: FakeOpenAI) -> None:
    down(fake)
    async with running_app(tmp_path, **llm(fake.base_url)) as (client, _deps):
        user = unique("llm-down")
        task = (await client.post("/v1/memories", json={"messages": CHAT, "user_id": user})).json()["task_id"]
        seen: dict[str, Any] = {}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # until the task has waited through more attempts than the old three
            body = await status(client, task)
            assert body["status"] in ("queued", "processing", "retrying"), body
            if body["status"] == "retrying":
                seen = body
                if body["retry"]["attempt"] >= 4:
                    break
            await asyncio.sleep(0.2)
        retry = seen["retry"]
        assert retry["attempt"] >= 4 and retry["dependency"] == "the LLM", seen
        assert "unavailable" in retry["reason"].lower()
        assert retry["since"] < retry["next_at"] and seen["error"] is None

        fake.reset()
        fake.respond_with(FACTS)  # the LLM is back
        done = await wait_task(client, task, timeout=90)
        assert done["status"] == "completed", done
        assert "The user lives in Porto." in [m["content"] for m in done["result"]["memories"]]
        assert done.get("retry") is None


async def test_a_fault_that_outlasts_the_budget_fails_naming_the_dependency_and_the_wait(tmp_path: Path,
                                                                                        fake: FakeOpenAI) -> None:
    down(fake)
    async with running_app(tmp_path, **llm(fake.base_url, write_retry_budget_seconds=5)) as (client, _deps):
        task = (await client.post("/v1/memories", json={"messages": CHAT, "user_id": unique("budget")})).json()
        done = await wait_task(client, task["task_id"], timeout=90)
        assert done["status"] == "failed", done
        error = done["error"]
        assert error.startswith("gave up after waiting ") and "for the LLM" in error, error
        waited = float(error.removeprefix("gave up after waiting ").split(" s ", 1)[0])
        assert waited >= 5 and "WRITE_RETRY_BUDGET_SECONDS=5" in error
        assert "retrying" in done["_seen"]


async def test_a_failure_met_while_redis_is_paused_is_recorded_when_redis_answers(tmp_path: Path,
                                                                                 fake: FakeOpenAI) -> None:
    """The LLM refuses the request (401: no retry helps) while Redis takes no writes: the failed record
    is written once Redis answers, not dropped (`job_fail_unrecorded` before)."""
    fake.script(MODEL, [401])
    async with SlowProxy(fake.port) as proxy, running_app(
            tmp_path, **llm(f"http://127.0.0.1:{proxy.port}/v1"), redis_timeout_seconds=0.5) as (client, deps):
        proxy.delay = 3.0  # the refusal arrives inside the pause
        task = (await client.post("/v1/memories", json={"messages": CHAT, "user_id": unique("paused")})).json()
        deadline = time.monotonic() + 30
        while (await status(client, task["task_id"]))["status"] == "queued" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        redis = deps.tasks.redis
        await aw(redis.client_pause(6000, all=False))  # WRITE: reads (the polls) still answer
        try:
            await asyncio.sleep(4.5)
            assert (await status(client, task["task_id"]))["status"] == "processing"  # failed, but not writable yet
        finally:
            await aw(redis.client_unpause())
        done = await wait_task(client, task["task_id"], timeout=60)
        assert done["status"] == "failed" and "401" in done["error"], done
        assert len(fake.calls("chat")) == 1  # refused once, never retried


async def test_writes_outlast_a_redis_pause_longer_than_three_tries(tmp_path: Path) -> None:
    async with running_app(tmp_path, redis_timeout_seconds=0.5) as (client, deps):
        user = unique("pause")
        tasks = []
        for i in range(6):
            raw = {"content": f"I keep project notes in notebook {i}", "user_id": user, "category": "workflow"}
            tasks.append((await client.post("/v1/memories/raw", json=raw)).json()["task_id"])
            chat = {"messages": [{"role": "user", "content": f"I prefer tabs over spaces in repo number {i}."}],
                    "user_id": user}
            tasks.append((await client.post("/v1/memories", json=chat)).json()["task_id"])
        await aw(deps.tasks.redis.client_pause(10_000, all=True))  # longer than 2 + 4 s of the old backoff
        await asyncio.sleep(10.5)
        ended = [await wait_task(client, t, timeout=120) for t in tasks]
        assert [e["status"] for e in ended] == ["completed"] * len(tasks), [e.get("error") for e in ended]


async def test_health_says_degraded_but_200_when_a_loop_stays_late_or_the_queue_is_behind(tmp_path: Path) -> None:
    async with running_app(tmp_path, embedded_worker=False, queue_age_degraded_seconds=1) as (client, deps):
        resp = await client.get("/health")
        assert resp.status_code == 200 and resp.json()["checks"]["event_loop"] == "ok"
        loops = resp.json()["write_path"]["loops"]
        assert loops == [] or {rec["role"] for rec in loops} == {"api"}  # its own figures, once published
        # A worker process whose loop stayed late writes so (what service/core/loop.py publishes every 5 s).
        await deps.kv.note_loop({"role": "worker", "pid": 4242, "lag_s": 3.5, "recent_peak_s": 4.0, "peak_s": 6.0,
                                 "jobs_running": 1, "jobs_peak": 64, "jobs_allowed_share": 0.02})
        # And a write nobody takes (no worker here) grows older than QUEUE_AGE_DEGRADED_SECONDS.
        await client.post("/v1/memories/raw", json={"content": "I use Vim", "user_id": unique("q"),
                                                    "category": "preference"})
        await asyncio.sleep(1.2)
        resp = await client.get("/health")
        body = resp.json()
        assert resp.status_code == 200, body  # slow is not down
        assert body["status"] == "degraded" and body["down"] == []
        assert body["checks"]["event_loop"] == "slow" and body["checks"]["queue"] == "behind"
        assert body["checks"]["redis"] == "ok" and body["write_path"]["oldest_task_age_s"] >= 1
        assert any(rec["pid"] == 4242 and rec["jobs_peak"] == 64 for rec in body["write_path"]["loops"])
