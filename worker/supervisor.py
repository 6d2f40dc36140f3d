"""The parent's side of the embedded profile's worker child (WORKER_PROCESS=child; the child itself is
worker/child.py, docs/decisions.md "The worker's process"): the API process serves its Qdrant Edge shard on a Unix
socket (service/stores/remote.py), starts each child with its settings on stdin, starts it again when it exits
(backoff 0.5 s doubling to 10 s), and stops it at shutdown (SIGTERM, then SIGKILL after STOP_TIMEOUT_S).

WORKER_PROCESSES=N starts N children on the same socket, each consuming its shards' queues (service/tasks/shards.py
`shards_of_process`): with WORKER_SHARDS >= N a user's jobs all run in one child.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
from pydantic import SecretStr

from service.core.settings import Settings, env_dict
from service.deps import Deps
from service.stores.remote import VectorServer
from service.tasks.shards import shards_of_process

log = structlog.get_logger(__name__)

ROOT = Path(__file__).resolve().parents[1]
STOP_TIMEOUT_S = 20.0
STEADY_S = 60.0  # a child that ran this long restarts after the shortest delay again


def settings_line(settings: Settings) -> bytes:
    """The parent's settings, secrets included, as one JSON line for the child's stdin (never argv or env);
    the socket's token follows on a second line."""
    values: dict[str, Any] = {}
    for name, value in env_dict(settings).items():
        values[name.lower()] = value.get_secret_value() if isinstance(value, SecretStr) else value
    return (json.dumps(values, default=str) + "\n").encode()


class ChildWorker:
    """The parent's side: the vector server and the child's supervision (the app's BackgroundWorker)."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._tasks: list[asyncio.Task[None]] = []
        self._procs: dict[int, asyncio.subprocess.Process] = {}
        self._server: VectorServer | None = None
        self._dir: str | None = None
        self._stopping = False
        self.starts = 0

    @property
    def pids(self) -> list[int]:
        return [p.pid for _, p in sorted(self._procs.items()) if p.returncode is None]

    @property
    def pid(self) -> int | None:
        return next(iter(self.pids), None)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._serve(), name="worker-process")]

    async def _serve(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="memory-worker-")  # 0700: only this user reaches the socket
        self._server = VectorServer(self._deps.vectors, Path(self._dir) / "vectors.sock")
        await self._server.start()
        settings = self._deps.settings
        count = settings.worker.processes
        await asyncio.gather(*(self._supervise(i, shards_of_process(i, count, settings.redis.worker_shards))
                               for i in range(count)))

    async def _supervise(self, index: int, shards: list[int]) -> None:
        assert self._server is not None
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        delay = 0.5
        for _ in range(10**6):  # bounded; ends at stop()
            if self._stopping:
                return
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "worker.child", "--socket", str(self._server.path),
                "--shard", ",".join(map(str, shards)), stdin=asyncio.subprocess.PIPE, env=env)
            self._procs[index] = proc
            self.starts += 1
            assert proc.stdin is not None
            with contextlib.suppress(ConnectionError):
                proc.stdin.write(settings_line(self._deps.settings) + self._server.token.hex().encode() + b"\n")
                await proc.stdin.drain()
            proc.stdin.close()
            log.info("worker_process_started", pid=proc.pid, socket=str(self._server.path), shards=shards)
            code = await proc.wait()
            if self._stopping:
                return
            delay = 0.5 if time.monotonic() - started > STEADY_S else delay
            log.warning("worker_process_exited", pid=proc.pid, returncode=code, restart_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def stop(self) -> None:
        self._stopping = True
        await asyncio.gather(*(self._stop_child(proc) for proc in self._procs.values()))
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        log.info("worker_process_stopped")

    @staticmethod
    async def _stop_child(proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is not None:
            return
        proc.terminate()  # the child's worker cancels its jobs; ARQ keeps them queued and reruns them later
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            log.warning("worker_process_killed", pid=proc.pid, after_s=STOP_TIMEOUT_S)
            proc.kill()
            await proc.wait()
