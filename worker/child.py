"""The embedded profile's worker in a child process (WORKER_PROCESS=child; docs/decisions.md "The worker's process"):
`python -m worker.child`, started by the API process (worker/supervisor.py).

The API process (the parent) keeps the Qdrant Edge shard, one process per shard, and serves it on a Unix socket
(service/stores/remote.py). The child is the same ARQ worker as the in-process one (worker/embedded.py), with its
own event loop, GIL and embedder; its vector store is the parent's, reached through that socket. Redis and Neo4j
it reaches itself. So the parent's event loop only answers HTTP and the child's vector calls.

A child whose parent is gone stops itself. A job that was running when the child died is found by the reaper
(TaskQueue.reap) like any killed worker's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import structlog

from service.core.heap import freeze_startup_heap, track_gc_pauses
from service.core.logging import configure_logging
from service.core.settings import Settings
from service.deps import build_deps
from service.stores.remote import RemoteVectorStore
from service.tasks.shards import parse_shards
from worker.embedded import EmbeddedWorker, serve

log = structlog.get_logger(__name__)


def _term_with_parent() -> None:
    """Linux: the kernel sends this process SIGTERM the moment its parent dies (PR_SET_PDEATHSIG), so an orphan stops
    taking jobs at once instead of failing them on the dead parent's socket until the next one-second check."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG


async def run_child(settings: Settings, socket: Path, token: bytes, shards: list[int] | None = None) -> int:
    """The child: the ARQ worker on the parent's vector store, until SIGTERM or the parent's death."""
    parent = os.getppid()
    _term_with_parent()
    if os.getppid() != parent:  # it died before the request took effect
        return 0

    def started(worker: EmbeddedWorker) -> None:
        if settings.metrics.worker_port:
            from prometheus_client import start_http_server

            start_http_server(settings.metrics.worker_port)  # the worker's metrics (jobs, graph writes, embedding)
        track_gc_pauses()
        freeze_startup_heap()

    return await serve(lambda: build_deps(settings, vectors=RemoteVectorStore(socket, token), role="worker"),
                       shards, started=started, orphaned=lambda: os.getppid() != parent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.child", description="started by the API process")
    parser.add_argument("--socket", required=True, help="the API process's vector store socket")
    parser.add_argument("--shard", action="append", default=[], help="shards to consume (default: all)")
    args = parser.parse_args(argv)
    line, token = sys.stdin.readline(), sys.stdin.readline().strip()
    if not line or not token:
        print("error: no settings on stdin (this process is started by `python -m service`)", file=sys.stderr)
        return 2
    # The child embeds in-process and runs the worker itself: none of the parent's child-process options apply.
    settings = Settings(**{**json.loads(line), "embed_process": "inline", "worker_process": "inline"})
    configure_logging(settings.service)
    with contextlib.suppress(OSError):
        os.nice(settings.worker.process_nice)
    shards = parse_shards(args.shard, settings.redis.worker_shards)
    return asyncio.run(run_child(settings, Path(args.socket), bytes.fromhex(token), shards))


if __name__ == "__main__":
    sys.exit(main())
