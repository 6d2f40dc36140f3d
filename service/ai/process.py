"""The write path's embedder in a child process (docs/decisions.md "Where the write path embeds").

When the worker runs inside the API process (WORKER_PROCESS=inline), embedding a batch is the heaviest thing it
does: the model's matrix products take every core, so while the worker drains a backlog the event loop that
accepts requests waits for the CPU.
Here the model runs in a child process, at a lower CPU priority (`nice`), and the parent only sends texts and
receives float32 vectors through a pipe. The parent keeps everything else, the Qdrant Edge shard included (one
process per shard). Query embeddings (one short text per search) stay in the parent: a search does not queue
behind a write batch.

A child that dies fails the calls in flight with DependencyUnavailable (the jobs retry) and is started again on
the next call, at most MAX_RESTARTS times per minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import structlog

from service.ai.local import LocalEmbedder, ModelFiles, TextKind
from service.core.errors import DependencyUnavailable

log = structlog.get_logger(__name__)

MAX_RESTARTS = 5  # per minute
START_TIMEOUT_S = 120.0


def child_main(conn: Connection, files: ModelFiles, batch_size: int, threads: int,
               nice: int) -> None:  # pragma: no cover - runs in the child
    """The child: load the model, then answer (request id, kind, texts) with (request id, float32 bytes | error)."""
    with contextlib.suppress(OSError):
        os.nice(nice)
    embedder = LocalEmbedder(files, batch_size=batch_size, threads=threads)
    embedder._load()
    conn.send(("ready", embedder.dim))
    for _ in range(10**12):  # until the parent closes the pipe
        try:
            request_id, kind, texts = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send((request_id, embedder.encode_array(texts, kind).astype(np.float32).tobytes()))
        except Exception as exc:  # the parent fails this call; the child keeps serving
            conn.send((request_id, f"{type(exc).__name__}: {exc}"[:500]))


class ProcessEmbedder:
    """The local embedder (service/ai/local.py) in a child process: the same name, dim and variant."""

    def __init__(self, files: ModelFiles, batch_size: int = 64, threads: int = 0, nice: int = 10) -> None:
        """`nice`: the child's CPU priority below the parent's (0-19; EMBED_PROCESS_NICE)."""
        self._files = files
        self.name, self.dim, self.variant = files.model_id, files.dim, files.variant
        self._batch_size = batch_size
        self._threads = threads
        self._nice = nice
        self._proc: Any = None
        self._conn: Connection | None = None
        self._reader: threading.Thread | None = None
        self._pending: dict[int, asyncio.Future[list[list[float]]]] = {}
        self._next = 0
        self._starts: list[float] = []
        self._start_lock = asyncio.Lock()
        self.calls = 0

    async def warm_up(self) -> None:
        await self._ensure()

    async def _ensure(self) -> Connection:
        async with self._start_lock:
            if self._conn is not None and self._proc is not None and self._proc.is_alive():
                return self._conn
            now = time.monotonic()
            self._starts = [t for t in self._starts if now - t < 60] + [now]
            if len(self._starts) > MAX_RESTARTS:
                raise DependencyUnavailable("the embedder process keeps dying (more than 5 starts a minute)")
            ctx = multiprocessing.get_context("spawn")  # no fork of a process holding threads and sockets
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=child_main, name="embedder", daemon=True,
                               args=(child, self._files, self._batch_size, self._threads, self._nice))
            proc.start()
            child.close()
            ready = await asyncio.to_thread(_wait_ready, parent, proc)
            self._proc, self._conn = proc, parent
            loop = asyncio.get_running_loop()
            self._reader = threading.Thread(target=self._read, args=(parent, loop), name="embedder-reader",
                                            daemon=True)
            self._reader.start()
            log.info("embedder_process_started", pid=proc.pid, dim=ready, nice=self._nice)
            return parent

    def _read(self, conn: Connection, loop: asyncio.AbstractEventLoop) -> None:
        """Reader thread: hands each answer to its waiting call on the event loop."""
        try:
            for _ in range(10**12):
                try:
                    request_id, payload = conn.recv()
                except (EOFError, OSError):
                    break
                loop.call_soon_threadsafe(self._answer, request_id, payload)
            loop.call_soon_threadsafe(self._lost, conn)
        except RuntimeError:  # the event loop is closed: the process is shutting down
            return

    def _answer(self, request_id: int, payload: bytes | str) -> None:
        future = self._pending.pop(request_id, None)
        if future is None or future.done():
            return
        if isinstance(payload, str):
            future.set_exception(RuntimeError(f"embedder process: {payload}"))
        else:
            future.set_result(np.frombuffer(payload, dtype=np.float32).reshape(-1, self.dim).tolist())

    def _lost(self, conn: Connection) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(DependencyUnavailable("the embedder process exited"))
        log.warning("embedder_process_lost", failed_calls=len(pending))

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await self._call(texts, "passage")

    async def embed_symmetric(self, texts: list[str]) -> list[list[float]]:
        return await self._call(texts, "symmetric")

    async def _call(self, texts: list[str], kind: TextKind) -> list[list[float]]:
        if not texts:
            return []
        conn = await self._ensure()
        self._next += 1
        request_id = self._next
        future: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            conn.send((request_id, kind, texts))
        except (OSError, ValueError) as exc:
            self._pending.pop(request_id, None)
            raise DependencyUnavailable(f"the embedder process is gone: {exc}") from exc
        self.calls += 1
        return await future

    async def embed_query(self, text: str) -> list[float]:
        """One text (the write path's embedder is not used for queries, but it is a full Embedder)."""
        [vector] = await self._call([text], "query")
        return vector

    async def close(self) -> None:
        conn, proc = self._conn, self._proc
        self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            await asyncio.to_thread(proc.join, 10)
            if proc.is_alive():
                proc.kill()


def _wait_ready(conn: Connection, proc: Any) -> int:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if conn.poll(0.5):
                tag, dim = conn.recv()
                if tag == "ready":
                    return int(dim)
        except (EOFError, OSError):
            break
        if not proc.is_alive():
            break
    proc.kill()
    raise DependencyUnavailable("the embedder process did not start")
