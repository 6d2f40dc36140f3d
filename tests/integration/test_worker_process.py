"""The embedded profile's worker in a child process (WORKER_PROCESS=child, worker/child.py): writes land in the
API process's shard through its socket, a killed child is replaced and its jobs still end, and stopping the
service stops the child. Plus the socket's own rules (service/stores/remote.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from scripts.bench.procs import stack_env, start_service, stop
from service.core.errors import DependencyUnavailable
from service.stores.qdrant_edge import EdgeVectorStore
from service.stores.remote import RemoteVectorStore, VectorServer
from service.stores.vector import MemoryFilter
from tests.conftest import unique
from tests.integration.conftest import wait_task


def children(pid: int) -> list[int]:
    """The worker children of `pid` (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"worker.child" in cmdline:
                found.append(int(child))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}").exists() else ""
    return "State:\tZ" not in status


async def wait_for(predicate, what: str, timeout: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_remote_store_needs_the_token_and_reconnects_after_the_server_restarts(tmp_path: Path) -> None:
    parent = EdgeVectorStore(tmp_path / "edge", "remote_rules")
    await parent.ensure_collection(8, "test-embedder")
    server = VectorServer(parent, tmp_path / "vectors.sock")
    await server.start()
    intruder = RemoteVectorStore(server.path, b"x" * 32)
    remote = RemoteVectorStore(server.path, server.token)
    try:
        with pytest.raises(DependencyUnavailable):  # the server hangs up on a wrong token, before unpickling
            await asyncio.wait_for(intruder.count(), 10)
        assert await remote.count(MemoryFilter(user_id="nobody")) == 0
        assert await remote.index_backlog() >= 0
        calls = server.calls
        await server.close()
        with pytest.raises(DependencyUnavailable):  # the server is gone: a retryable error, not a hang
            await asyncio.wait_for(remote.count(), 10)
        server = VectorServer(parent, tmp_path / "vectors.sock")
        server.token = remote._token  # the same child reconnecting to a restarted server
        await server.start()
        assert await remote.count(MemoryFilter(user_id="nobody")) == 0  # connected again on the next call
        assert calls >= 2 and server.calls == 1
        await remote.close()  # the child's close leaves the shard open in the parent
        assert await parent.count() == 0
    finally:
        await intruder.close()
        await remote.close()
        await server.close()
        await parent.close()


async def test_the_worker_child_stores_writes_is_replaced_when_killed_and_stops_with_the_service(
        tmp_path: Path) -> None:
    user = unique("childw")
    # The killed child's jobs run again once the reaper finds their lease lapsed (TASK_LEASE_SECONDS, 5 s here) and
    # their task twice that old, or once ARQ's in-progress mark lapses, ARQ_JOB_TIMEOUT + 10 s after their claim
    # (20 s here), whichever comes first. A job needs well under 9 s.
    env = stack_env(tmp_path / "data", unique("test:childq"), WORKER_PROCESS="child", WORKER_PROCESS_NICE="5",
                    RECONCILE_INTERVAL_SECONDS="2", RECONCILE_GRACE_SECONDS="1", ARQ_JOB_TIMEOUT="10",
                    TASK_LEASE_SECONDS="5")
    proc, port = start_service(env, tmp_path / "service.log")
    try:
        first = await wait_for(lambda: children(proc.pid), "the worker child", 90)
        assert len(first) == 1 and first[0] != proc.pid
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            async def write(i: int) -> str:
                resp = await client.post("/v1/memories/raw", json={
                    "content": f"Deploys service {i} with Nomad{i} on Fridays", "user_id": user,
                    "category": "decision"})
                assert resp.status_code == 202, resp.text
                return str(resp.json()["task_id"])

            tasks = await asyncio.gather(*(write(i) for i in range(20)))
            for t in tasks:
                assert (await wait_task(client, t, timeout=90))["status"] == "completed"
            found = (await client.post("/v1/search", json={"query": "Nomad7", "user_id": user})).json()
            assert found["results"][0]["content"] == "Deploys service 7 with Nomad7 on Fridays"

            more = await asyncio.gather(*(write(i) for i in range(20, 60)))
            os.kill(first[0], signal.SIGKILL)  # mid-drain: its jobs are rerun by the next child
            second = await wait_for(lambda: [c for c in children(proc.pid) if c != first[0]], "a new child", 60)
            for t in more:
                done = await wait_task(client, t, timeout=120)
                assert done["status"] == "completed", done
            listed = (await client.get("/v1/memories", params={"user_id": user, "limit": 100})).json()
            assert len(listed["memories"]) == 60  # one memory per write, none lost, none doubled
        stop(proc)
        assert proc.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a graceful stop
        log = (tmp_path / "service.log").read_text()
        assert "worker_process_stopped" in log
        # the API process and both children froze their start-up heaps (service/core/heap.py)
        frozen = [json.loads(line) for line in log.splitlines() if '"heap_frozen"' in line]
        assert len(frozen) >= 3 and all(f["objects"] > 10_000 for f in frozen), frozen
        assert not alive(second[0])  # the child stopped with the service
    finally:
        stop(proc, signal.SIGKILL)
