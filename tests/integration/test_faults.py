"""Faults on real processes: Redis stopped, Neo4j stopped, the service SIGKILLed mid-job."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import httpx
import redis.asyncio as aioredis

from scripts.bench import graph_probe as probe
from scripts.bench.procs import SlowProxy, start_neo4j, start_redis, start_service, stop
from service.identity.rules import NameRules
from service.stores.neo4j.store import Neo4jGraphStore
from service.stores.qdrant_edge import EdgeVectorStore
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task


async def test_redis_stopped_means_503_on_writes_and_degraded_health(tmp_path: Path) -> None:
    proc, port = start_redis(tmp_path)
    try:
        async with running_app(tmp_path, redis_url=f"redis://127.0.0.1:{port}/0") as (client, _):
            user = unique("u")
            ok = await client.post("/v1/memories/raw", json={"content": "a", "user_id": user, "category": "preference"})
            assert ok.status_code == 202
            assert (await wait_task(client, ok.json()["task_id"]))["status"] == "completed"

            stop(proc)
            started = time.monotonic()
            resp = await client.post(
                "/v1/memories/raw", json={"content": "b", "user_id": user, "category": "preference"}
            )
            elapsed = time.monotonic() - started
            assert resp.status_code == 503, resp.text
            detail = resp.json()["detail"]  # the cause in the user's terms; the URL and the error stay in the log
            assert detail == "the queue (Redis) is unreachable; writes resume when it is back", detail
            assert elapsed < 2.0, f"503 took {elapsed:.2f}s"

            health = await client.get("/health")
            assert health.status_code == 503
            body = health.json()
            assert body["status"] == "degraded"
            assert body["checks"]["redis"] == "down"
            assert "errors" not in body  # the reasons are for admin keys only
            assert body["checks"]["vector_store"] == "ok"
            assert body["checks"]["graph_store"] == "ok"
            # reads do not need Redis
            search = await client.post("/v1/search", json={"query": "a", "user_id": user})
            assert search.status_code == 200
            assert len(search.json()["results"]) == 1
    finally:
        stop(proc)


async def test_health_degraded_when_neo4j_is_stopped(tmp_path: Path) -> None:
    proc, port = start_neo4j(tmp_path)
    try:
        async with running_app(tmp_path, neo4j_uri=f"bolt://127.0.0.1:{port}", graph_timeout_seconds=2) as (
            client,
            _,
        ):
            assert (await client.get("/health")).status_code == 200
            user = unique("graphdown")
            ok = await client.post("/v1/memories/raw", json={"content": "I use Neovim daily", "user_id": user,
                                                             "category": "preference"})
            assert (await wait_task(client, ok.json()["task_id"]))["status"] == "completed"
            stop(proc)
            # reads: the vector results still come back, marked degraded
            search = await client.post("/v1/search", json={"query": "Neovim", "user_id": user})
            assert search.status_code == 200
            assert search.json()["degraded"] == ["graph"]
            assert [r["source"] for r in search.json()["results"]] == ["vector"]
            assert (await client.post("/v1/graph/search", json={"query": "Neovim", "user_id": user})).status_code == 503
            health = await client.get("/health")
            assert health.status_code == 503
            body = health.json()
            assert body["status"] == "degraded"
            assert body["checks"]["graph_store"] == "down"
            assert body["checks"]["redis"] == "ok"
            assert body["checks"]["vector_store"] == "ok"
    finally:
        stop(proc)


async def test_slow_graph_degrades_search_to_vector_results(tmp_path: Path) -> None:
    upstream = int(os.environ["TEST_NEO4J_URI"].rsplit(":", 1)[1])
    async with SlowProxy(upstream) as proxy, running_app(
        tmp_path, neo4j_uri=f"bolt://127.0.0.1:{proxy.port}", graph_timeout_seconds=3
    ) as (client, _):
        user = unique("slowgraph")
        ok = await client.post("/v1/memories/raw", json={"content": "I use Helix as my editor", "user_id": user,
                                                         "category": "preference"})
        assert (await wait_task(client, ok.json()["task_id"]))["status"] == "completed"
        await client.post("/v1/search", json={"query": "Helix editor", "user_id": user})  # warm the query plans
        fast = (await client.post("/v1/search", json={"query": "Helix editor", "user_id": user})).json()
        assert fast["degraded"] == []
        proxy.delay = 10.0
        started = time.monotonic()
        slow = await client.post("/v1/search", json={"query": "Helix editor", "user_id": user})
        assert time.monotonic() - started < 9  # answered at the graph timeout, not after the graph
        assert slow.status_code == 200
        assert slow.json()["degraded"] == ["graph"]
        assert slow.json()["results"][0]["content"] == "I use Helix as my editor"
        proxy.delay = 0.0


async def test_sigkill_mid_job_reruns_and_converges(tmp_path: Path) -> None:
    """Kill the service (API + in-process worker) while jobs are processing; after a restart every
    job completes and each task has exactly one vector and one Memory node."""
    queue = unique("test:killq")
    user = unique("killed")
    env = {
        "REDIS_URL": os.environ["TEST_REDIS_URL"],
        "NEO4J_URI": os.environ["TEST_NEO4J_URI"],
        "NEO4J_DATABASE": os.environ.get("TEST_NEO4J_DATABASE", "memory"),
        "DATA_DIR": str(tmp_path / "data"),
        "ARQ_QUEUE_NAME": queue,
        "ARQ_JOB_TIMEOUT": "4",  # ARQ's in-progress lock expires job_timeout + 10 s after a crash
        "ARQ_MAX_JOBS": "2",
        "EMBEDDER": "hash",
    }
    log_path = tmp_path / "service.log"
    redis = aioredis.Redis.from_url(os.environ["TEST_REDIS_URL"])
    task_ids: list[str] = []
    killed_processing: list[str] = []
    try:
        for _attempt in range(3):  # the kill must land while a job runs; retry the race a few times
            proc, port = start_service(env, log_path)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                batch = []
                for i in range(40):
                    body = {"content": f"fact number {i} of run {_attempt}", "user_id": user, "category": "decision"}
                    resp = await client.post("/v1/memories/raw", json=body)
                    assert resp.status_code == 202
                    batch.append(resp.json()["task_id"])
                task_ids += batch
                keys = [f"{queue}:task:{t}" for t in batch]
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    records = [json.loads(r) for r in await redis.mget(keys) if r]
                    if any(r["status"] == "processing" for r in records):
                        proc.send_signal(signal.SIGKILL)
                        break
                    await asyncio.sleep(0.002)
            stop(proc, signal.SIGKILL)
            records = [json.loads(r) for r in await redis.mget([f"{queue}:task:{t}" for t in task_ids])]
            killed_processing = [r["task_id"] for r in records if r["status"] == "processing"]
            if killed_processing:
                break
        assert killed_processing, "could not SIGKILL the service while a job was processing"

        # Restart on the same data: the interrupted jobs rerun once ARQ's in-progress lock expires.
        proc, port = start_service(env, log_path)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            for t in task_ids:
                done = await wait_task(client, t, timeout=60)
                assert done["status"] == "completed", done
        stop(proc)  # release the Qdrant Edge shard so the test can open it

        vectors = EdgeVectorStore(tmp_path / "data" / "qdrant", "memory_platform")
        graph = Neo4jGraphStore(env["NEO4J_URI"], "neo4j", None, env["NEO4J_DATABASE"], 5, NameRules())
        try:
            await vectors.ensure_collection(384, "hash-384")
            assert await vectors.count(MemoryFilter(user_id=user)) == len(task_ids)
            assert await probe.count_memories(graph, user) == len(task_ids)
        finally:
            await vectors.close()
            await graph.close()
    finally:
        await redis.aclose()
