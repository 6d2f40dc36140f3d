"""User-sharded queues (WORKER_SHARDS, service/tasks/shards.py) on real worker processes and real Redis: one hot user's
jobs run in one worker process, and a change of the shard count with jobs queued runs every job once."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from pathlib import Path

import httpx
import redis.asyncio as aioredis
from arq.constants import health_check_key_suffix

from scripts.bench import graph_probe as probe
from scripts.bench.procs import stack_env, start_service, stop
from service.core.kv import aw
from service.identity.rules import NameRules
from service.stores.neo4j.store import Neo4jGraphStore
from service.stores.qdrant_edge import EdgeVectorStore
from service.stores.vector import MemoryFilter
from service.tasks.shards import counts_key, queue_name, queue_names, shard_of
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task
from tests.integration.test_worker_process import children, wait_for

PEOPLE = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi")
PLACES = ("Lisbon", "Berlin", "Oslo", "Kyoto")


def users_on(shards: int, want: list[int], prefix: str) -> list[str]:
    """One fresh user id per wanted shard."""
    out: list[str] = []
    for k in want:
        for _ in range(10_000):  # bounded; a shard out of `shards` is hit within a few tries
            user = unique(prefix)
            if shard_of(user, shards) == k:
                out.append(user)
                break
    assert len(out) == len(want)
    return out


def fact(rng: random.Random, i: int) -> str:
    """A memory naming people and a place of one small shared pool: the hot user's graph is one dense cluster."""
    a, b = rng.sample(PEOPLE, 2)
    return f"{a} met {b} in {rng.choice(PLACES)} on day {i} to plan release {i}"


async def test_two_worker_processes_on_their_own_shards_write_a_hot_user_without_deadlocks(tmp_path: Path) -> None:
    queue = unique("test:shardq")
    hot, cold = users_on(2, [0, 1], "hot")
    env = stack_env(tmp_path / "data", queue, WORKER_PROCESS="child", WORKER_PROCESSES="2", WORKER_SHARDS="2",
                    WORKER_PROCESS_NICE="0", RECONCILE_INTERVAL_SECONDS="2", RECONCILE_GRACE_SECONDS="1",
                    ARQ_JOB_TIMEOUT="30", ARQ_MAX_JOBS="32")
    proc, port = start_service(env, tmp_path / "service.log")
    redis = aioredis.Redis.from_url(os.environ["TEST_REDIS_URL"])
    rng = random.Random(34)
    n_hot, n_cold = 80, 40
    try:
        kids = await wait_for(lambda: len(children(proc.pid)) == 2 and children(proc.pid), "two worker children", 90)
        # each child's ARQ worker polls its own shard's queue (ARQ's health-check key is per queue)
        for k in (0, 1):
            key = queue_name(queue, k, 2) + health_check_key_suffix
            await wait_for_async(lambda key=key: redis.exists(key), f"the worker of shard {k}", 60)  # type: ignore[misc]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            async def write(user: str, i: int) -> str:
                resp = await client.post("/v1/memories/raw", json={
                    "content": fact(rng, i), "user_id": user, "category": "personal_fact"})
                assert resp.status_code == 202, resp.text
                return str(resp.json()["task_id"])

            jobs = [(hot, i) for i in range(n_hot)] + [(cold, i) for i in range(n_cold)]
            rng.shuffle(jobs)
            tasks = await asyncio.gather(*(write(u, i) for u, i in jobs))
            for t in tasks:
                done = await wait_task(client, t, timeout=180)
                assert done["status"] == "completed", done
            health = (await client.get("/health")).json()
            assert health["write_path"]["deadlock_retries"] == 0, health["write_path"]
            assert health["write_path"]["graph_transient_retries"] == 0, health["write_path"]
            assert health["write_path"]["pending_tasks"] == 0, health["write_path"]
            assert health["write_path"]["outbox_depth"] == 0, health["write_path"]
            for user, n in ((hot, n_hot), (cold, n_cold)):
                listed = (await client.get("/v1/memories", params={"user_id": user, "limit": 200})).json()
                assert len(listed["memories"]) == n  # one memory per write: none lost, none doubled
        assert sorted(children(proc.pid)) == sorted(kids)  # neither child died on the way
        assert {m.decode() for m in await redis.smembers(counts_key(queue))} == {"2"}
        assert await redis.exists(queue) == 0  # nothing went to the unsharded queue
        stop(proc)
        graph = Neo4jGraphStore(env["NEO4J_URI"], "neo4j", None, env["NEO4J_DATABASE"], 5, NameRules())
        vectors = EdgeVectorStore(tmp_path / "data" / "qdrant", "memory_platform")
        try:
            await vectors.ensure_collection(384, "hash-384")
            for user, n in ((hot, n_hot), (cold, n_cold)):
                assert await vectors.count(MemoryFilter(user_id=user)) == n
                assert await probe.count_memories(graph, user) == n
        finally:
            await vectors.close()
            await graph.close()
    finally:
        stop(proc, signal.SIGKILL)
        await redis.aclose()


async def wait_for_async(check, what: str, timeout: float) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout / 0.2)):  # bounded
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_shard_count_change_with_jobs_queued_runs_every_job_once(tmp_path: Path) -> None:
    """Jobs accepted under WORKER_SHARDS=1 and then 3 wait (no worker); workers under 2 run every one of them once."""
    queue = unique("test:reshard")
    users = [unique("reshard") for _ in range(6)]
    accepted: dict[str, list[str]] = {u: [] for u in users}

    async def accept(shards: int, batch: str) -> None:
        async with running_app(tmp_path, arq_queue_name=queue, worker_shards=shards, embedded_worker=False) as (
                client, deps):
            for user in users:
                for i in range(4):
                    resp = await client.post("/v1/memories/raw", json={
                        "content": f"{batch}: {user} prefers tool {i}", "user_id": user, "category": "preference"})
                    assert resp.status_code == 202, resp.text
                    accepted[user].append(resp.json()["task_id"])
            assert await deps.tasks.leases.queued_jobs() == len(users) * 4  # waiting on this count's queues

    await accept(1, "first")
    await accept(3, "second")
    redis = aioredis.Redis.from_url(os.environ["TEST_REDIS_URL"])
    try:
        assert await redis.zcard(queue) == len(users) * 4  # the one queue of WORKER_SHARDS=1
        assert sum([await redis.zcard(q) for q in queue_names(queue, 3)]) == len(users) * 4
        assert {m.decode() for m in await redis.smembers(counts_key(queue))} == {"1", "3"}

        async with running_app(tmp_path, arq_queue_name=queue, worker_shards=2) as (client, deps):
            for user, tasks in accepted.items():
                for t in tasks:
                    done = await wait_task(client, t, timeout=90)
                    assert done["status"] == "completed", done
                    record = await deps.tasks.records.record(t)
                    assert record is not None and record["attempt"] == 1  # ran once, not retried or rerun
                listed = (await client.get("/v1/memories", params={"user_id": user, "limit": 50})).json()
                assert sorted(m["content"] for m in listed["memories"]) == sorted(
                    f"{b}: {user} prefers tool {i}" for b in ("first", "second") for i in range(4))
                assert await probe.count_memories(deps.graph, user) == 8
            # once nothing waits under the old counts, they are forgotten (the tick goes back to its cheap form)
            await wait_for_async(lambda: _counts_are(redis, queue, {"2"}), "the old counts forgotten", 30)
            for q in {queue, *queue_names(queue, 3)} - set(queue_names(queue, 2)):
                assert await redis.zcard(q) == 0, q
    finally:
        await redis.aclose()


async def _counts_are(redis: aioredis.Redis, queue: str, want: set[str]) -> bool:
    return {m.decode() for m in await aw(redis.smembers(counts_key(queue)))} == want


async def test_the_reaper_requeues_a_lost_job_on_its_users_shard(tmp_path: Path) -> None:
    async with running_app(tmp_path, worker_shards=3, embedded_worker=False) as (client, deps):
        queue = deps.settings.redis.queue_name
        user = users_on(3, [2], "reap")[0]
        task = (await client.post("/v1/memories/raw", json={"content": "lost on shard two", "user_id": user,
                                                             "category": "preference"})).json()["task_id"]
        redis = deps.tasks.redis
        shard_queue = queue_name(queue, 2, 3)
        assert await redis.zscore(shard_queue, task) is not None  # accepted onto the user's shard
        await redis.delete(f"arq:job:{task}")  # the job vanishes (a worker died on it)
        await redis.zrem(shard_queue, task)
        assert (await deps.tasks.leases.reap(older_than_s=0))["requeued"] == 1
        assert await redis.zscore(shard_queue, task) is not None  # back on the same shard's queue
        assert all([await redis.zscore(q, task) is None for q in queue_names(queue, 3) if q != shard_queue])
        assert await redis.zscore(queue, task) is None
