"""Write-path integrity on the real stack: every task ends, nothing is half-stored for good.

Concurrency on one user, non-transient failures, lost ARQ jobs (the reaper), a graph that fails after
the vector write (the outbox and its reconciler), a delete whose graph step fails, and the full
reconcile's repairs in both directions.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix

from scripts.bench import graph_probe as probe
from scripts.bench.procs import SlowProxy
from service.core.domain import Memory, Scope, content_hash
from service.core.kv import aw
from service.deps import Deps
from service.identity.names import type_family
from service.registry import JOB_KINDS
from service.stores.vector import MemoryFilter
from service.tasks.jobs import RawJob
from service.tasks.leases import INTERRUPTIONS_FORGIVEN
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task, write_raw
from worker.embedded import EmbeddedWorker
from worker.handlers import job_handlers, worker_context
from worker.jobs import run_job

NAMES = ("Alice", "Bob", "Carol", "Dave")
PLACES = ("Lisbon", "Berlin")
TOOLS = ("PostgreSQL", "Redis", "Rust")


async def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what} not reached within {timeout}s (last: {last})")


async def test_32_concurrent_jobs_of_one_user_share_entities_without_deadlocks(
    client: httpx.AsyncClient, deps: Deps
) -> None:
    user = unique("hot")
    before = deps.graph.deadlock_retries
    bodies = [
        {"content": f"{NAMES[i % 4]} met {NAMES[(i + 1) % 4]} in {PLACES[i % 2]} to talk about {TOOLS[i % 3]} "
                    f"(meeting {i})",
         "user_id": user, "category": "personal_fact"}
        for i in range(16)
    ] + [
        {"content": f"I use {TOOLS[i % 3]} with {NAMES[i % 4]} for project {i}", "user_id": user,
         "category": "technical_skill"}
        for i in range(16)
    ]
    accepted = await asyncio.gather(*(client.post("/v1/memories/raw", json=b) for b in bodies))
    assert all(r.status_code == 202 for r in accepted)
    done = await asyncio.gather(*(wait_task(client, r.json()["task_id"], timeout=60) for r in accepted))
    assert [d["status"] for d in done] == ["completed"] * 32, [d for d in done if d["status"] != "completed"]
    assert {d["result"]["graph"] for d in done} == {"stored"}
    entities = await probe.entities(deps.graph, user)
    # one node per name and type family: the offline extractor types an uncued name as a generic `thing`, and a
    # name held with a specific type is not merged with a generic mention of it (docs/identity.md)
    kinds = [(str(e["name"]).casefold(), type_family(str(e["type"]))) for e in entities]
    assert len(kinds) == len(set(kinds)), "an entity was created twice"
    names = [name for name, _ in kinds]
    for name in (*NAMES[1:], *PLACES, *TOOLS):
        assert name.casefold() in names
    assert await probe.count_memories(deps.graph, user) == 32
    assert await deps.vectors.count(MemoryFilter(user_id=user)) == 32
    assert deps.graph.deadlock_retries == before


async def test_non_transient_error_ends_failed_and_releases_the_idempotency_pointer(
    client: httpx.AsyncClient, deps: Deps
) -> None:
    user = unique("bad")
    # A job the service cannot store: a scope that does not exist (as a corrupted or hand-made job).
    task_id = await deps.tasks.enqueue(
        RawJob(user_id=user, scope="galactic", category="preference", content="x"), {"probe": unique("p")})
    done = await wait_task(client, task_id)
    assert done["status"] == "failed"
    assert "galactic" in done["error"]
    # A payload that is not a job at all also ends failed, with the reason.
    bogus = unique("bogus")
    await deps.tasks.redis.set(deps.tasks.key(f"task:{bogus}"), '{"status": "queued", "result": null, "error": null}')
    await deps.tasks.redis.enqueue_job("memory_raw", bogus, {"kind": "raw", "user_id": user}, _job_id=bogus)
    failed = await wait_task(client, bogus)
    assert failed["status"] == "failed" and "invalid job payload" in failed["error"]
    # A failed write releases its pointer at once: the identical request is a new write.
    body = {"content": "same body twice", "user_id": user, "category": "preference"}
    first = (await client.post("/v1/memories/raw", json=body)).json()["task_id"]
    await wait_task(client, first)
    await deps.tasks.records.mark_failed(first, "forced for the test")
    second = (await client.post("/v1/memories/raw", json=body)).json()["task_id"]
    assert second != first
    assert (await wait_task(client, second))["status"] == "completed"


async def test_reaper_ends_a_task_whose_job_vanished_and_requeues_one_with_tries_left(tmp_path: Path) -> None:
    async with running_app(tmp_path, embedded_worker=False) as (client, deps):
        user = unique("lost")
        lost = (await client.post("/v1/memories/raw", json={"content": "lost on its last try", "user_id": user,
                                                            "category": "preference"})).json()["task_id"]
        requeued = (await client.post("/v1/memories/raw", json={"content": "lost early", "user_id": user,
                                                                "category": "preference"})).json()["task_id"]
        redis = deps.tasks.redis
        for t in (lost, requeued):  # the jobs vanish from Redis (a worker died; ARQ ended them)
            await redis.delete(job_key_prefix + t)
            await redis.zrem(deps.settings.redis.queue_name, t)
        await deps.tasks.records.mark_processing(lost, 5)  # retried a few times on a slow dependency: not what counts
        rec = await deps.tasks.records.record(lost) or {}  # lost with its worker as often as ARQ_MAX_RETRIES allows
        await redis.set(deps.tasks.key(f"task:{lost}"), json.dumps({**rec, "lost": deps.settings.redis.max_tries - 1}))

        counts = await deps.tasks.leases.reap(older_than_s=0)
        assert counts["failed"] == 1 and counts["requeued"] == 1
        status = (await client.get(f"/v1/memories/status/{lost}")).json()
        assert status["status"] == "failed" and status["error"].startswith("lost:")
        again = await client.post("/v1/memories/raw", json={"content": "lost on its last try", "user_id": user,
                                                             "category": "preference"})
        assert again.status_code == 202 and again.json()["task_id"] != lost

        worker = EmbeddedWorker(deps)
        worker.start()
        try:
            assert (await wait_task(client, requeued))["status"] == "completed"
            assert (await wait_task(client, again.json()["task_id"]))["status"] == "completed"
        finally:
            await worker.stop()
        assert await deps.tasks.leases.pending_count() == 0


async def with_worker(client: httpx.AsyncClient, deps: Deps, task: str) -> dict[str, Any]:
    """Run an embedded worker until the task ends; its final status."""
    worker = EmbeddedWorker(deps)
    worker.start()
    try:
        return await wait_task(client, task, 60)
    finally:
        await worker.stop()


async def test_attempts_whose_worker_died_are_not_tries(tmp_path: Path) -> None:
    """A service killed and restarted over and over (chaos.py: 20 SIGKILLs in a minute) interrupted some jobs as
    often as they have tries; ARQ then refused the next run ("max retries exceeded") and the reaper failed tasks
    whose memories were stored. An attempt the reaper finds abandoned (its worker died) is forgiven instead."""
    async with running_app(tmp_path, embedded_worker=False) as (client, deps):
        user = unique("interrupted")
        body = {"content": "written through many restarts", "user_id": user, "category": "preference"}
        task = (await client.post("/v1/memories/raw", json=body)).json()["task_id"]
        redis = deps.tasks.redis
        tries = deps.settings.redis.max_tries
        # What workers leave when every one of the job's runs died mid-job: ARQ counted each pickup, the last run's
        # in-progress key stays, its record says processing and its lease has lapsed.
        await redis.set(retry_key_prefix + task, tries)
        await redis.set(in_progress_key_prefix + task, b"1", px=60_000)
        await deps.tasks.records.mark_processing(task, tries)
        rec = await deps.tasks.records.record(task)
        assert rec is not None
        await redis.set(deps.tasks.key(f"task:{task}"), json.dumps({**rec, "updated_at": "2000-01-01T00:00:00+00:00"}))

        assert (await deps.tasks.leases.reap(older_than_s=0))["released"] == 1
        assert int(await redis.get(retry_key_prefix + task)) == tries - 1  # that run was not a try
        status = await with_worker(client, deps, task)
        assert status["status"] == "completed", status
        assert (await deps.tasks.records.record(task) or {})["interrupted"] == 1

        # A job that kills its worker every time is forgiven only so often.
        other = (await client.post("/v1/memories/raw", json={"content": "kills its worker", "user_id": user,
                                                             "category": "preference"})).json()["task_id"]
        rec = await deps.tasks.records.record(other) or {}
        await redis.set(deps.tasks.key(f"task:{other}"), json.dumps({**rec, "interrupted": INTERRUPTIONS_FORGIVEN}))
        await redis.set(retry_key_prefix + other, 2)
        assert not await deps.tasks.leases.forgive_interruption(other)
        assert int(await redis.get(retry_key_prefix + other)) == 2


async def test_a_job_cancelled_by_its_workers_stop_is_not_a_try(tmp_path: Path) -> None:
    upstream = int(os.environ["TEST_NEO4J_URI"].rsplit(":", 1)[1])
    async with SlowProxy(upstream) as proxy, running_app(
        tmp_path, neo4j_uri=f"bolt://127.0.0.1:{proxy.port}", embedded_worker=False
    ) as (client, deps):
        user = unique("stopped")
        body = {"content": "written while the worker stops", "user_id": user, "category": "preference"}
        task = (await client.post("/v1/memories/raw", json=body)).json()["task_id"]
        proxy.delay = 5.0  # the job's graph write is in flight when the worker stops
        worker = EmbeddedWorker(deps)
        worker.start()

        async def running() -> bool:
            return (await deps.tasks.records.record(task) or {}).get("status") == "processing"

        await wait_for(running, 30, "the job to start")
        await asyncio.sleep(0.5)
        await worker.stop()  # cancels the running job; ARQ keeps it queued to run again
        rec = await deps.tasks.records.record(task) or {}
        assert rec["status"] == "processing" and rec["interrupted"] == 1
        assert int(await deps.tasks.redis.get(retry_key_prefix + task) or 0) == 0  # its pickup was not a try

        proxy.delay = 0.0
        status = await with_worker(client, deps, task)
        assert status["status"] == "completed", status
        assert (await deps.tasks.records.record(task) or {})["attempt"] == 1  # the run after the stop is its first try


async def test_graph_failing_after_the_vector_write_is_repaired_by_the_reconciler(tmp_path: Path) -> None:
    upstream = int(os.environ["TEST_NEO4J_URI"].rsplit(":", 1)[1])
    async with SlowProxy(upstream) as proxy, running_app(
        tmp_path, neo4j_uri=f"bolt://127.0.0.1:{proxy.port}", graph_timeout_seconds=1
    ) as (client, deps):
        user = unique("pending")
        await write_raw(client, content="I deploy with Nomad on weekdays", user_id=user, category="workflow")
        proxy.delay = 8.0  # every graph call now outlasts its timeout
        resp = await client.post("/v1/memories/raw", json={"content": "I use PostgreSQL for my projects",
                                                           "user_id": user, "category": "technical_skill"})
        done = await wait_task(client, resp.json()["task_id"], timeout=60)
        assert done["status"] == "completed" and done["result"]["graph"] == "pending"
        memory_id = done["result"]["memories"][0]["id"]
        health = (await client.get("/health")).json()
        assert health["write_path"]["outbox_depth"] >= 1
        search = (await client.post("/v1/search", json={"query": "PostgreSQL projects", "user_id": user})).json()
        assert memory_id in [r["id"] for r in search["results"]]  # searchable while the graph half waits
        assert search["degraded"] == ["graph"]

        proxy.delay = 0.0

        async def landed() -> bool:
            status = (await client.get(f"/v1/memories/status/{resp.json()['task_id']}")).json()
            return bool(status["result"]["graph"] == "stored")

        await wait_for(landed, 60, "the reconciler landing the graph half")
        assert await probe.count_memories(deps.graph, user) == 2
        answers: list[dict[str, Any]] = []

        async def graph_answers() -> bool:  # a pooled connection the slow proxy broke can fail one call (503)
            body = {"query": "PostgreSQL", "user_id": user}
            answers.append((await client.post("/v1/graph/search", json=body)).json())
            return "results" in answers[-1]

        await wait_for(graph_answers, 20, "graph search answering again")
        facts = answers[-1]
        assert any(memory_id in f["memory_ids"] for f in facts["results"])
        assert (await deps.backlog.outbox.stats())[0] == 0


async def test_delete_whose_graph_step_fails_is_finished_and_can_be_retried(tmp_path: Path) -> None:
    upstream = int(os.environ["TEST_NEO4J_URI"].rsplit(":", 1)[1])
    async with SlowProxy(upstream) as proxy, running_app(
        tmp_path, neo4j_uri=f"bolt://127.0.0.1:{proxy.port}", graph_timeout_seconds=1
    ) as (client, deps):
        user = unique("del")
        done = await write_raw(client, content="I use Kubernetes for deployments", user_id=user,
                               category="technical_skill")
        memory_id = done["result"]["memories"][0]["id"]
        facts = (await client.post("/v1/graph/search", json={"query": "Kubernetes", "user_id": user})).json()
        assert any(memory_id in f["memory_ids"] for f in facts["results"])

        proxy.delay = 8.0
        first = await client.delete(f"/v1/memories/{memory_id}", params={"user_id": user})
        assert first.status_code == 202
        deleted = await wait_task(client, first.json()["task_id"], timeout=60)
        assert deleted["status"] == "completed" and deleted["result"]["graph"] == "pending"
        # the vector is gone, the graph half is not: a retried delete is accepted, not 404
        retry = await client.delete(f"/v1/memories/{memory_id}", params={"user_id": user})
        assert retry.status_code == 202, retry.text

        proxy.delay = 0.0

        async def gone() -> bool:
            nodes = await deps.graph.reads.memory_nodes(user, [memory_id])
            return bool(nodes and nodes[0].get("deleted_at"))

        await wait_for(gone, 60, "the reconciler finishing the delete")
        facts = (await client.post("/v1/graph/search", json={"query": "Kubernetes", "user_id": user})).json()
        assert not any(memory_id in f["memory_ids"] for f in facts["results"])
        search = (await client.post("/v1/search", json={"query": "Kubernetes", "user_id": user})).json()
        assert search["results"] == [] and search["degraded"] == []
        assert (await wait_task(client, retry.json()["task_id"], timeout=30))["status"] == "completed"


async def test_search_never_returns_facts_of_a_memory_the_vector_store_no_longer_holds(
    client: httpx.AsyncClient, deps: Deps
) -> None:
    user = unique("stale")
    done = await write_raw(client, content="I use Terraform for infrastructure", user_id=user,
                           category="technical_skill")
    memory_id = done["result"]["memories"][0]["id"]
    facts = (await client.post("/v1/graph/search", json={"query": "Terraform", "user_id": user})).json()["results"]
    assert any(memory_id in f["memory_ids"] for f in facts)
    before = (await client.post("/v1/search", json={"query": "Terraform", "user_id": user})).json()["results"]
    assert [r["id"] for r in before] == [memory_id]  # its facts are folded into the vector hit
    await deps.vectors.delete([memory_id])  # the state a delete leaves while its graph half is pending
    after = (await client.post("/v1/search", json={"query": "Terraform", "user_id": user})).json()["results"]
    assert after == []


async def test_full_reconcile_repairs_drift_in_both_directions(client: httpx.AsyncClient, deps: Deps) -> None:
    user = unique("drift")
    kept = await write_raw(client, content="I use Vim every day", user_id=user, category="preference")
    lost_vector = await write_raw(client, content="I use Emacs on weekends", user_id=user, category="preference")
    deleted = await write_raw(client, content="I use Nano sometimes", user_id=user, category="preference")
    lost_vector_id = lost_vector["result"]["memories"][0]["id"]
    deleted_id = deleted["result"]["memories"][0]["id"]
    # drift 1: a vector with no graph node (the orphan of a crashed job)
    stamp = "2026-01-01T00:00:00+00:00"
    orphan = Memory(id=str(uuid.uuid4()), user_id=user, content="I use Helix for Rust", category="preference",
                    scope=Scope.GLOBAL, hash=content_hash("I use Helix for Rust"), created_at=stamp, updated_at=stamp)
    [vec] = await deps.embedder.embed([orphan.content])
    await deps.vectors.upsert([orphan], [vec])
    # drift 2: a live node whose vector was lost
    await deps.vectors.delete([lost_vector_id])
    # drift 3: a delete that recorded its intent and removed the vector, then lost its outbox entry
    await deps.outbox.put(_remove_intent(user, deleted_id))
    await deps.outbox.clear("drift-test")
    await deps.vectors.delete([deleted_id])
    await asyncio.sleep(deps.settings.writepath.reconcile_grace_seconds + 0.2)

    dry = await client.post("/v1/maintenance/reconcile", json={"user_id": user, "dry_run": True})
    assert dry.status_code == 202
    dry_done = await wait_task(client, dry.json()["task_id"])
    assert dry_done["status"] == "completed", dry_done
    assert dry_done["result"]["repairs"] == {"graph_node_missing": 1, "vector_missing": 1,
                                             "vector_of_deleted_memory": 0, "delete_finished": 1}
    assert await probe.count_memories(deps.graph, user) == 3  # a dry run repairs nothing

    real = await client.post("/v1/maintenance/reconcile", json={"user_id": user})
    report = await wait_task(client, real.json()["task_id"])
    assert report["result"]["repairs"]["graph_node_missing"] == 1
    ids = {m.id for m in (await deps.vectors.scroll(MemoryFilter(user_id=user, all_scopes=True), 50))[0]}
    assert ids == {kept["result"]["memories"][0]["id"], lost_vector_id, orphan.id}
    nodes = {str(n["id"]): n for n in await deps.graph.reads.memory_nodes(user, [orphan.id, deleted_id,
                                                                                 lost_vector_id])}
    assert nodes[orphan.id].get("deleted_at") is None and nodes[orphan.id]["content"] == orphan.content
    assert nodes[deleted_id].get("deleted_at")
    assert await probe.count_memories(deps.graph, user) == 3
    runs = (await client.get("/v1/maintenance/runs")).json()["items"]
    mine = [r for r in runs if r["run_id"] == real.json()["run_id"]]
    assert mine and mine[0]["kind"] == "reconcile" and mine[0]["repairs"]["vector_missing"] == 1
    again = await client.post("/v1/maintenance/reconcile", json={"user_id": user})
    assert set((await wait_task(client, again.json()["task_id"]))["result"]["repairs"].values()) == {0}


def _remove_intent(user: str, memory_id: str) -> Any:
    from service.ledger.outbox import Intent

    return Intent(op="remove", task_id="drift-test", user_id=user, memory_ids=[memory_id], now="2026-01-01T00:00:00")


async def test_deleting_erases_the_content_everywhere_the_service_keeps_it(
    client: httpx.AsyncClient, deps: Deps
) -> None:
    user = unique("erase")
    marker = f"Quxplor{uuid.uuid4().hex[:8]}"
    raw = await write_raw(client, content=f"I use {marker} for deployments", user_id=user, category="technical_skill")
    conv = await client.post("/v1/memories", json={"user_id": user, "messages": [
        {"role": "user", "content": f"I prefer {marker} over Jenkins. I live in Lisbon."}]})
    conv_done = await wait_task(client, conv.json()["task_id"])
    ids = [m["id"] for m in raw["result"]["memories"]]
    ids += [m["id"] for m in conv_done["result"]["memories"] if marker in m["content"]]
    assert len(ids) == 3  # the raw write, the extracted preference, and the message kept verbatim
    assert await _redis_holds(deps, marker) and await _graph_holds(deps, marker)
    deleted = await client.post("/v1/memories/delete", json={"user_id": user, "memory_ids": ids})
    assert (await wait_task(client, deleted.json()["task_id"]))["status"] == "completed"
    assert await deps.vectors.get(ids) == []
    assert await _redis_holds(deps, marker) == []
    assert await _graph_holds(deps, marker) == []
    # what is left is a tombstone: ids and times
    nodes = await deps.graph.reads.memory_nodes(user, ids)
    assert {n["id"] for n in nodes} == set(ids) and all(n["deleted_at"] and n["content"] is None for n in nodes)


async def test_a_delete_of_everything_erases_the_users_words_everywhere(
    client: httpx.AsyncClient, deps: Deps
) -> None:
    """After a user's delete of everything, neither what they stored nor what they searched for is anywhere in
    Redis, Qdrant or Neo4j: memories, traces (their query text), retrieval counts, task results, idempotency
    records, conversations and runs."""
    user = unique("erase-all")
    said, asked = f"Quxplor{uuid.uuid4().hex[:8]}", f"Zentrav{uuid.uuid4().hex[:8]}"
    await write_raw(client, content=f"I deploy with {said} on Fridays", user_id=user, category="technical_skill")
    conv = await client.post("/v1/memories", headers={"Idempotency-Key": f"k-{said}"}, json={
        "user_id": user, "session_id": unique("s"), "messages": [
            {"role": "user", "content": f"I prefer {said} over Jenkins. I live in Lisbon."}]})
    assert (await wait_task(client, conv.json()["task_id"]))["status"] == "completed"
    run = await client.post("/v1/runs", json={"user_id": user, "task": f"Roll out {said} to staging"})
    assert (await wait_task(client, run.json()["task_id"]))["status"] == "completed"
    step = await client.post(f"/v1/runs/{run.json()['run_id']}/steps/0/tool-calls", json={
        "user_id": user, "tool": "Bash", "arguments": {"command": f"{said} deploy --why {asked}"},
        "status": "error", "error": f"{said} timed out"})
    assert (await wait_task(client, step.json()["task_id"]))["status"] == "completed"
    for query in (f"how do I deploy? {asked}", f"{said} {asked}"):
        found = await client.post("/v1/search", json={"user_id": user, "query": query, "trace": True})
        assert found.status_code == 200 and found.json()["trace_id"], found.text
    assert (await client.post("/v1/graph/search", json={"user_id": user, "query": f"{said} {asked}"})
            ).status_code == 200
    await deps.usage.drain()
    await asyncio.gather(*deps.traces.trace_writes)
    assert await _graph_holds(deps, asked), "the trace keeps the query text until the delete"
    assert await _redis_holds(deps, said) and await _graph_holds(deps, said) and await _vectors_hold(deps, said)

    deleted = await client.post("/v1/memories/delete", json={"user_id": user, "all": True})
    assert deleted.status_code == 202
    done = await wait_task(client, deleted.json()["task_id"])
    assert done["status"] == "completed"
    # what it keeps, said in the answer: no text of the user's
    assert set(done["result"]["kept"]) == {"tombstones", "task_records", "idempotency_records"}
    await deps.usage.drain()
    assert (await wait_task(client, conv.json()["task_id"]))["result"] == {"erased": True}
    for marker in (said, asked):
        assert await _redis_holds(deps, marker) == [], marker
        assert await _graph_holds(deps, marker) == [], marker
        assert await _vectors_hold(deps, marker) == [], marker
    assert [k async for k in deps.tasks.redis.scan_iter(match=f"*retrieved:{user}")] == []
    traces = await client.get("/v1/traces", params={"user_id": user})
    assert traces.status_code == 200 and traces.json()["items"] == []


async def _vectors_hold(deps: Deps, marker: str) -> list[str]:
    """The ids of the Qdrant points, of any user, whose payload holds `marker`."""
    users = {b.user_id for b in await deps.vectors.boundaries()}
    found: list[str] = []
    for user in users:
        cursor: str | None = None
        while True:
            page, cursor = await deps.vectors.scroll(MemoryFilter(user_id=user, all_scopes=True,
                                                                  max_sensitivity=None), 500, cursor)
            found += [m.id for m in page if marker in m.model_dump_json()]
            if cursor is None:
                break
    return found


async def _redis_holds(deps: Deps, marker: str) -> list[str]:
    """Every Redis key whose value holds `marker` (strings, hashes, sets, sorted sets)."""
    redis = deps.tasks.redis
    found: list[str] = []
    needle = marker.encode()
    async for key in redis.scan_iter(count=1000):
        kind = (await aw(redis.type(key))).decode()
        if kind == "string":
            values = [await redis.get(key) or b""]
        elif kind == "hash":
            values = list((await aw(redis.hgetall(key))).values())
        elif kind == "set":
            values = list(await aw(redis.smembers(key)))
        elif kind == "zset":
            values = [m for m, _ in await redis.zrange(key, 0, -1, withscores=True)]
        elif kind == "list":
            values = list(await aw(redis.lrange(key, 0, -1)))
        else:
            values = []
        if needle in key or any(needle in v for v in values):
            found.append(key.decode())
    return found


async def _graph_holds(deps: Deps, marker: str) -> list[str]:
    """Every node and relationship property that holds `marker`, as `Label.key` / `:TYPE.key`."""
    graph: Any = deps.graph

    async def run(tx: Any) -> list[str]:
        holds = ("[k IN keys(x) WHERE (x[k] IS :: STRING AND x[k] CONTAINS $s) "
                 "OR (x[k] IS :: LIST<STRING> AND any(v IN x[k] WHERE v CONTAINS $s))]")
        nodes = await (await tx.run(f"MATCH (x) WITH x, {holds} AS ks WHERE ks <> [] "
                                    "RETURN labels(x)[0] AS what, ks", s=marker)).data()
        rels = await (await tx.run(f"MATCH ()-[x]->() WITH x, {holds} AS ks WHERE ks <> [] "
                                   "RETURN ':' + type(x) AS what, ks", s=marker)).data()
        return [f"{r['what']}.{k}" for r in nodes + rels for k in r["ks"]]

    return list(await graph.executor.read(run))


async def test_a_late_rerun_of_a_write_does_not_bring_back_a_memory_deleted_meanwhile(
    client: httpx.AsyncClient, deps: Deps
) -> None:
    """A job whose lease lapsed while it ran (a stalled worker) is released and runs a second time. If that
    second run reaches its vector upsert after the memory was deleted, the memory must stay deleted."""
    user = unique("late-rerun")
    done = await write_raw(client, content="I keep my notes in Obsidian", user_id=user, category="technical_skill")
    [mem] = done["result"]["memories"]
    resp = await client.delete(f"/v1/memories/{mem['id']}", params={"user_id": user})
    assert resp.status_code == 202
    assert (await wait_task(client, resp.json()["task_id"]))["status"] == "completed"

    job = RawJob(user_id=user, scope=mem["scope"], category=mem["category"], content=mem["content"],
                 accepted_at=mem["created_at"])
    rerun = await job_handlers(deps).writes.raw(str(done["task_id"]), job)
    assert [m["id"] for m in rerun["memories"]] == [mem["id"]]  # the very same memory, written again
    assert await deps.vectors.get([mem["id"]]) == []
    [node] = await deps.graph.reads.memory_nodes(user, [mem["id"]])
    assert node.get("deleted_at")
    listed = await client.get("/v1/memories", params={"user_id": user})
    assert listed.status_code == 200 and listed.json()["memories"] == []


async def test_a_second_run_of_a_job_whose_end_was_recorded_does_nothing(client: httpx.AsyncClient,
                                                                         deps: Deps) -> None:
    """The final write reached Redis but its answer did not reach the worker (a timeout under load), so the job
    was retried; or the reaper released a job whose worker stalled. The task stays completed and its work does
    not run again (the memory deleted meanwhile is not written back either)."""
    user = unique("second-run")
    done = await write_raw(client, content="I water the plants on Sundays", user_id=user, category="personal_fact")
    task_id = str(done["task_id"])
    [mem] = done["result"]["memories"]
    resp = await client.delete(f"/v1/memories/{mem['id']}", params={"user_id": user})
    assert (await wait_task(client, resp.json()["task_id"]))["status"] == "completed"
    before = await deps.tasks.records.record(task_id)
    assert before is not None and before["status"] == "completed"

    [spec] = [k for k in JOB_KINDS if k.model is RawJob]
    job = RawJob(user_id=user, scope=mem["scope"], category=mem["category"], content=mem["content"],
                 accepted_at=mem["created_at"])
    await run_job({**worker_context(deps), "job_try": 2}, task_id, job.model_dump(mode="json"), spec)

    assert await deps.tasks.records.record(task_id) == before  # not back to processing, not rewritten
    assert await deps.vectors.get([mem["id"]]) == []
