"""Private service processes for fault tests (a Redis or Neo4j a test may stop, a service it may kill), and the
benches' `--smoke` plumbing: a service of its own on the test stack, and the `smoke: OK` / `smoke: FAIL` verdict."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float, name: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not listen on {port} within {timeout}s")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def start_redis(tmp: Path, port: int | None = None, aof: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    """A private Redis in `tmp` (AOF on with `aof`: a restart on the same port and dir keeps the data)."""
    exe = shutil.which("redis-server")
    assert exe, "redis-server missing (scripts/test.sh installs it)"
    port = port or free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp), "--save", "",
         "--appendonly", "yes" if aof else "no", "--appendfsync", "always"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port, proc, 20, "redis")
    return proc, port


def start_neo4j(tmp: Path, port: int | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """A private Neo4j with its store in `tmp` (restart it with the same `port` to keep both)."""
    port = port or free_port()
    log = (tmp / "neo4j.log").open("ab")
    proc = subprocess.Popen(
        [str(ROOT / "scripts/neo4j/run.sh"), "--home", str(tmp / "neo4j"), "--port", str(port),
         "--database", "memory", "--heap", "384m", "--pagecache", "64m"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    wait_port(port, proc, 180, "neo4j")
    return proc, port


def stack_env(data_dir: Path, queue: str, **extra: str) -> dict[str, str]:
    """The environment of a `python -m service` on the test stack (TEST_* variables), own data and queue."""
    return {
        "REDIS_URL": os.environ["TEST_REDIS_URL"],
        "NEO4J_URI": os.environ["TEST_NEO4J_URI"],
        "NEO4J_DATABASE": os.environ.get("TEST_NEO4J_DATABASE", "memory"),
        "DATA_DIR": str(data_dir),
        "ARQ_QUEUE_NAME": queue,
        "EMBEDDER": "hash",
        **extra,
    }


def cli_env(env: dict[str, str], drop: tuple[str, ...] = ("REDIS_", "ARQ_")) -> dict[str, str]:
    """This process's environment without its own service settings, plus `env` (for CLI subprocesses)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith(drop)}, **env}


def start_service(
    env_overrides: dict[str, str], log_path: Path, port: int | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """`python -m service` as a user runs it (embedded profile, in-process worker)."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "NEO4J_", "QDRANT_", "ARQ_"))}
    env.update({"HOST": "127.0.0.1", "PORT": str(port), "LOG_FORMAT": "json", **env_overrides})
    proc = subprocess.Popen(
        [sys.executable, "-m", "service"], cwd=ROOT, env=env, stdout=log_path.open("ab"), stderr=subprocess.STDOUT
    )
    wait_port(port, proc, 120, "service")
    return proc, port


class SlowProxy:
    """A TCP proxy on 127.0.0.1 in the test's event loop; `delay` seconds are added to every chunk
    coming back from the upstream (a slow dependency without stopping it). With `upload_rate` (bytes per
    second), what the client sends is forwarded no faster than that: a big transaction takes longer than a
    small one, as on a slow link or a busy server."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.delay = 0.0
        self.upload_rate: float | None = None
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> SlowProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, slow: bool) -> None:
            try:
                while data := await src.read(4096 if not slow and self.upload_rate else 65536):
                    if slow and self.delay:
                        await asyncio.sleep(self.delay)
                    if not slow and self.upload_rate:
                        await asyncio.sleep(len(data) / self.upload_rate)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))


# ---- the benches' --smoke ------------------------------------------------------------------------------------------

SMOKE_LOG_LINES = 20  # the service log's last lines shown when a smoke fails


def smoke_verdict(ok: bool) -> int:
    """The last line of every bench's smoke run, and its exit status."""
    print(f"smoke: {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


async def smoke_or_fail(main: Callable[[], Awaitable[int]]) -> int:
    """`main()`, whose own checks end in `smoke_verdict`; an error on the way is a `smoke: FAIL` too, after its
    traceback."""
    try:
        return await main()
    except Exception:
        traceback.print_exc()
        return smoke_verdict(False)


async def smoke_against_service(name: str, run: Callable[[str, Path], Awaitable[bool]], **env: str) -> int:
    """A bench's smoke run against a `python -m service` of its own on the test stack (`stack_env`: the hash
    embedder, the offline extractor, a queue of its own, `env` beside them): `run(url, work)` does the bench's work
    in the temp dir `work` and says whether its figures are sane. A service that does not start, or a bench that
    raises on its data, is a failure; the service log's last lines are shown on any failure; the temp dir goes."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-smoke-"))
    ok = False
    try:
        environment = stack_env(work / "data", f"bench:{name}-smoke:{uuid.uuid4().hex[:8]}", LLM_PROVIDER="offline",
                                LOG_LEVEL="WARNING", **env)
        proc, port = await asyncio.to_thread(start_service, environment, work / "service.log")
        try:
            ok = await run(f"http://127.0.0.1:{port}", work)
        finally:
            await asyncio.to_thread(stop, proc)
    except (RuntimeError, OSError, ValueError, KeyError) as exc:  # the service did not start, the data unreadable
        print(f"error: {type(exc).__name__}: {exc}")
    finally:
        log = work / "service.log"
        if not ok and log.exists():
            tail = log.read_text(errors="replace").splitlines()[-SMOKE_LOG_LINES:]
            print("last lines of the service log:\n" + "\n".join(tail))
        shutil.rmtree(work, ignore_errors=True)
    return smoke_verdict(ok)

