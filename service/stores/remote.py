"""The vector store across a process boundary (WORKER_PROCESS=child, docs/decisions.md "The worker's process").

Qdrant Edge lets one process open a shard. With the worker in a child process, the API process keeps the shard
and serves it to the child on a Unix socket (`VectorServer`); the child's `RemoteVectorStore` is a `VectorStore`
whose every call is one request on that socket. Frames are a 4-byte length and a pickle of
`(call id, method, args)` or `(call id, ok, result or exception)`. The socket lives in a fresh 0700 directory,
so only this user's processes reach it, and a connection is served only after it sent the 32-byte token the
parent handed the child on its stdin: nothing is unpickled from a peer that did not prove it is that child.

Calls are multiplexed on one connection. A lost connection fails the calls in flight with
DependencyUnavailable (the jobs retry) and the next call connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import pickle
import secrets
import struct
from pathlib import Path
from typing import Any

import structlog

from service.core.domain import ListOrder, Memory
from service.core.errors import DependencyUnavailable
from service.stores.qdrant_common import visible_memories
from service.stores.vector import Boundary, MemoryFilter, RankRequest, VectorRecord, VectorStore

log = structlog.get_logger(__name__)

_HEADER = struct.Struct(">I")
TOKEN_BYTES = 32
MAX_FRAME = 512 * 1024 * 1024
CONNECT_TIMEOUT_S = 5.0
# What the child may call: the Protocol, except `close` (the child closes its connection, never the shard).
METHODS = frozenset({
    "ensure_collection", "record_embedder", "recorded_embedder", "upsert", "update_payload", "rank", "optimize",
    "index_backlog", "get", "delete", "scroll", "count", "scroll_vectors", "boundaries", "ping", "optimize_figures",
})


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    if size > MAX_FRAME:
        raise ConnectionError(f"frame of {size} bytes")
    return pickle.loads(await reader.readexactly(size))  # noqa: S301 - only from an authenticated peer


def _frame(obj: Any) -> bytes:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


def _portable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own bytes
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class VectorServer:
    """The parent's side: answers the child's calls with its own store, concurrently, in the event loop."""

    def __init__(self, store: VectorStore, path: Path) -> None:
        self._store = store
        self.path = path
        self.token = secrets.token_bytes(TOKEN_BYTES)  # the child's proof, handed to it on its stdin
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self.calls = 0

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        self.path.chmod(0o600)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock = asyncio.Lock()
        calls: set[asyncio.Task[None]] = set()
        self._connections.add(writer)
        try:
            try:
                token = await asyncio.wait_for(reader.readexactly(TOKEN_BYTES), CONNECT_TIMEOUT_S)
            except (asyncio.IncompleteReadError, ConnectionError, OSError, TimeoutError):
                return
            if not hmac.compare_digest(token, self.token):
                log.warning("vector_server_refused", reason="wrong token")
                return
            for _ in range(10**12):  # until the child disconnects
                try:
                    call_id, method, args = await _read_frame(reader)
                except (asyncio.IncompleteReadError, ConnectionError, OSError):
                    break
                task = asyncio.create_task(self._answer(writer, lock, call_id, method, args))
                calls.add(task)
                task.add_done_callback(calls.discard)
        finally:
            for task in list(calls):
                task.cancel()
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, writer: asyncio.StreamWriter, lock: asyncio.Lock, call_id: int, method: str,
                      args: tuple[Any, ...]) -> None:
        self.calls += 1
        reply: tuple[int, bool, Any]
        try:
            if method not in METHODS:
                raise DependencyUnavailable(f"the vector server has no method {method!r}")
            if method == "optimize_figures":  # the store's attribute `last_optimize`: the last index build's figures
                reply = (call_id, True, dict(getattr(self._store, "last_optimize", {})))
            else:
                reply = (call_id, True, await getattr(self._store, method)(*args))
        except Exception as exc:
            reply = (call_id, False, _portable(exc))
        async with lock:
            try:
                writer.write(_frame(reply))
                await writer.drain()
            except (ConnectionError, OSError):
                pass  # the child went away; its call failed on its side

    async def close(self) -> None:
        for writer in list(self._connections):  # asyncio's Server.close leaves open connections open
            writer.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None
        with contextlib.suppress(OSError):
            self.path.unlink()


class RemoteVectorStore:
    """The child's VectorStore: the parent's store, one socket request per call."""

    name = "qdrant-edge (via the API process)"

    def __init__(self, path: Path, token: bytes) -> None:
        self._path = path
        self._token = token
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        self._connect_lock = asyncio.Lock()
        self._send_lock = asyncio.Lock()
        self._closed = False
        self.last_optimize: dict[str, Any] = {}

    async def _connection(self) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._closed:
                raise DependencyUnavailable("the vector store connection is closed")
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(str(self._path)), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise DependencyUnavailable(f"the API process's vector store is unreachable: {exc}") from exc
            writer.write(self._token)
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader, writer), name="remote-vectors-reader")
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for _ in range(10**12):
                call_id, ok, value = await _read_frame(reader)
                future = self._pending.pop(call_id, None)
                if future is None or future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, pickle.UnpicklingError) as exc:
            self._lost(writer, exc)

    def _lost(self, writer: asyncio.StreamWriter, exc: BaseException) -> None:
        if writer is self._writer:
            self._writer = None
        writer.close()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(DependencyUnavailable(f"the API process's vector store went away: {exc}"))
        if pending:
            log.warning("remote_vectors_lost", failed_calls=len(pending), error=str(exc))

    async def _call(self, method: str, *args: Any) -> Any:
        writer = await self._connection()
        self._next += 1
        call_id = self._next
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            async with self._send_lock:
                writer.write(_frame((call_id, method, args)))
                await writer.drain()
        except (ConnectionError, OSError) as exc:
            self._pending.pop(call_id, None)
            raise DependencyUnavailable(f"the API process's vector store went away: {exc}") from exc
        try:
            return await future
        finally:
            self._pending.pop(call_id, None)

    async def ensure_collection(self, dim: int, embedder: str, variant: str = "",
                                compatible: frozenset[str] = frozenset(), allow_change: bool = False) -> None:
        await self._call("ensure_collection", dim, embedder, variant, compatible, allow_change)

    async def record_embedder(self, dim: int, embedder: str, variant: str = "") -> None:
        await self._call("record_embedder", dim, embedder, variant)

    async def recorded_embedder(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("recorded_embedder")
        return result

    async def upsert(self, memories: list[Memory], vectors: list[list[float]]) -> None:
        await self._call("upsert", memories, vectors)

    async def update_payload(self, memories: list[Memory]) -> None:
        await self._call("update_payload", memories)

    async def rank(self, requests: list[RankRequest]) -> list[list[tuple[str, float]]]:
        result: list[list[tuple[str, float]]] = await self._call("rank", requests)
        return result

    async def optimize(self) -> bool:
        changed = bool(await self._call("optimize"))
        self.last_optimize = dict(await self._call("optimize_figures"))  # the build's figures, as the parent has them
        return changed

    async def index_backlog(self) -> int:
        return int(await self._call("index_backlog"))

    async def get(self, ids: list[str]) -> list[Memory]:
        result: list[Memory] = await self._call("get", ids)
        return visible_memories(result)  # the serving process has no ceiling of this caller's

    async def delete(self, ids: list[str]) -> None:
        await self._call("delete", ids)

    async def scroll(self, flt: MemoryFilter, limit: int, cursor: str | None = None, order: ListOrder = ListOrder.ID
                     ) -> tuple[list[Memory], str | None]:
        result: tuple[list[Memory], str | None] = await self._call("scroll", flt, limit, cursor, order)
        return result

    async def count(self, flt: MemoryFilter | None = None) -> int:
        return int(await self._call("count", flt))

    async def scroll_vectors(self, flt: MemoryFilter, limit: int, cursor: str | None = None
                             ) -> tuple[list[VectorRecord], str | None]:
        result: tuple[list[VectorRecord], str | None] = await self._call("scroll_vectors", flt, limit, cursor)
        return result

    async def boundaries(self, user_id: str | None = None, limit: int = 100_000) -> list[Boundary]:
        result: list[Boundary] = await self._call("boundaries", user_id, limit)
        return result

    async def ping(self) -> None:
        await self._call("ping")

    async def close(self) -> None:
        """Closes this connection only; the shard stays open in the API process."""
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task


def _check(store: type[RemoteVectorStore]) -> type[VectorStore]:
    return store  # mypy: RemoteVectorStore satisfies the VectorStore Protocol


_check(RemoteVectorStore)
