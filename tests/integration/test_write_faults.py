"""Write-path integrity under real process faults: the service SIGKILLed during a stream of writes,
Redis restarted with jobs queued, Neo4j stopped for seconds. Bounded in count and time."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from scripts.bench import graph_probe as probe
from scripts.bench.procs import free_port, stack_env, start_neo4j, start_redis, start_service, stop
from service.identity.rules import NameRules
from service.maintenance import reconcile
from service.stores.neo4j.store import Neo4jGraphStore
from service.stores.qdrant_edge import EdgeVectorStore
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task
from worker.embedded import EmbeddedWorker

FAST_RECONCILE = {"RECONCILE_INTERVAL_SECONDS": "2", "RECONCILE_GRACE_SECONDS": "1", "RECONCILE_CRON_ENABLED": "false",
                  "DEDUP_CRON_ENABLED": "false"}


async def _post_until_accepted(port_ref: list[int], body: dict[str, Any], deadline: float) -> str:
    """POST a write, retrying connection errors while the service is down (bounded by `deadline`)."""
    for _ in range(10_000):
        if time.monotonic() > deadline:
            break
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_ref[0]}", timeout=5) as client:
                resp = await client.post("/v1/memories/raw", json=body)
            if resp.status_code == 202:
                return str(resp.json()["task_id"])
        except httpx.HTTPError:
            pass  # the service is being killed or restarted: try again
        await asyncio.sleep(0.1)
    raise AssertionError(f"write never accepted: {body['content']}")


async def test_sigkill_three_times_during_a_stream_of_writes_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    queue = unique("test:chaosq")
    user = unique("chaos")
    # TASK_LEASE_SECONDS=5: a killed run's job is released by the reaper 10 s after its task was accepted, not 30 s
    env = stack_env(tmp_path / "data", queue, ARQ_JOB_TIMEOUT="30", ARQ_MAX_JOBS="2", TASK_LEASE_SECONDS="5",
                    **FAST_RECONCILE)
    log_path = tmp_path / "service.log"
    port = free_port()
    proc, _ = start_service(env, log_path, port)
    port_ref = [port]
    rng = random.Random(7)
    deadline = time.monotonic() + 240
    contents = [f"{rng.choice(['Alice', 'Bob', 'Carol'])} uses {rng.choice(['Rust', 'Redis', 'Go'])} (write {i})"
                for i in range(120)]
    task_ids: dict[str, str] = {}

    async def writer(items: list[str]) -> None:
        for content in items:
            task_ids[content] = await _post_until_accepted(
                port_ref, {"content": content, "user_id": user, "category": "personal_fact"}, deadline)

    try:
        stream = asyncio.gather(*(writer(contents[k::4]) for k in range(4)))
        for share in (0.25, 0.5, 0.75):  # each kill lands mid-stream, with jobs queued and running
            for _ in range(2400):
                if len(task_ids) >= share * len(contents) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert len(task_ids) < len(contents), "the stream ended before the kill"
            stop(proc, signal.SIGKILL)
            proc, _ = start_service(env, log_path, port)
        await stream
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            done = [await wait_task(client, t, timeout=120) for t in task_ids.values()]
        stuck = [d for d in done if d["status"] not in ("completed", "failed")]
        failed = [d for d in done if d["status"] == "failed"]
        assert not stuck and not failed, (stuck, failed)
        assert len(task_ids) == len(contents)
    finally:
        stop(proc)

    vectors = EdgeVectorStore(tmp_path / "data" / "qdrant", "memory_platform")
    graph = Neo4jGraphStore(env["NEO4J_URI"], "neo4j", None, env["NEO4J_DATABASE"], 5, NameRules())
    try:
        await vectors.ensure_collection(384, "hash-384")
        page, _ = await vectors.scroll(MemoryFilter(user_id=user, all_scopes=True), 500)
        stored = [m.content for m in page]
        assert sorted(stored) == sorted(contents), "lost or duplicated in the vector store"
        assert await probe.count_memories(graph, user) == len(contents)
    finally:
        await vectors.close()
        await graph.close()


async def test_redis_restarted_with_100_jobs_queued_completes_them_all(tmp_path: Path) -> None:
    proc, port = start_redis(tmp_path, aof=True)
    try:
        async with running_app(tmp_path, redis_url=f"redis://127.0.0.1:{port}/0", embedded_worker=False) as (
            client, deps,
        ):
            user = unique("aof")
            accepted = await asyncio.gather(*(
                client.post("/v1/memories/raw", json={"content": f"queued fact {i}", "user_id": user,
                                                      "category": "decision"})
                for i in range(100)))
            ids = [r.json()["task_id"] for r in accepted]
            assert len(set(ids)) == 100
            stop(proc)  # SIGTERM: Redis writes its AOF and exits
            proc, _ = start_redis(tmp_path, port=port, aof=True)
            worker = EmbeddedWorker(deps)
            worker.start()
            try:
                done = [await wait_task(client, t, timeout=60) for t in ids]
            finally:
                await worker.stop()
            assert {d["status"] for d in done} == {"completed"}
            assert await deps.vectors.count(MemoryFilter(user_id=user)) == 100
            assert await probe.count_memories(deps.graph, user) == 100
    finally:
        stop(proc)


# Neo4j stays down OUTAGE_S seconds, and then for the seconds its restart takes. The outbox drain (the reconcile
# tick, here every second) meets the outage some 15 times: more than twice MAX_ATTEMPTS (reconcile.MAX_ATTEMPTS is
# lowered to it for this test; the service's 10 would need a 30 s outage, the suite's longest wait), so an outage
# counted as a failed attempt would abandon the intents and fail the test.
OUTAGE_S = 10
MAX_ATTEMPTS = 3


async def test_neo4j_stopped_for_seconds_during_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reconcile, "MAX_ATTEMPTS", MAX_ATTEMPTS)
    neo, port = start_neo4j(tmp_path)
    try:
        async with running_app(tmp_path, neo4j_uri=f"bolt://127.0.0.1:{port}", graph_timeout_seconds=2,
                               reconcile_interval_seconds=1) as (client, deps):
            user = unique("neo4jdown")
            before = [await client.post("/v1/memories/raw", json={"content": f"I use Rust for tool {i}",
                                                                   "user_id": user, "category": "technical_skill"})
                      for i in range(5)]
            for r in before:
                assert (await wait_task(client, r.json()["task_id"]))["result"]["graph"] == "stored"
            stop(neo)
            down_at = time.monotonic()
            during = []
            for i in range(20):
                resp = await client.post("/v1/memories/raw", json={"content": f"I use Go for service {i}",
                                                                   "user_id": user, "category": "technical_skill"})
                assert resp.status_code == 202
                during.append(resp.json()["task_id"])
            for t in during:
                done = await wait_task(client, t, timeout=60)
                assert done["status"] == "completed" and done["result"]["graph"] == "pending", done
            search = await client.post("/v1/search", json={"query": "Go service", "user_id": user})
            assert search.status_code == 200 and search.json()["degraded"] == ["graph"]
            assert search.json()["results"]
            context = await client.get("/v1/context/global", params={"user_id": user})  # lessons need the graph,
            assert context.status_code == 200 and context.json()["lessons"] == []  # the memory context does not
            assert context.json()["total"] >= 5
            health = (await client.get("/health")).json()
            assert health["write_path"]["outbox_depth"] >= 20
            await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))

            # in a thread: the service keeps running (and its drain keeps meeting the outage) while Neo4j starts; a
            # blocking start froze the event loop, and the backlog of ticks it released timed out on Redis
            neo, _ = await asyncio.to_thread(start_neo4j, tmp_path, port=port)
            deadline = time.monotonic() + 120
            for t in during:
                for _ in range(1000):
                    status = (await client.get(f"/v1/memories/status/{t}")).json()
                    if status["result"]["graph"] == "stored" or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.2)
                assert status["result"]["graph"] == "stored", status
            assert await probe.count_memories(deps.graph, user) == 25
            assert await deps.tasks.leases.pending_count() == 0
            assert (await deps.backlog.outbox.stats())[0] == 0
    finally:
        stop(neo)
