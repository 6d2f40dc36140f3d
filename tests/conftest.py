"""Shared test helpers. Integration services come from scripts/test.sh (TEST_* variables)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from service.ai.local import LocalEmbedder, ModelFiles
from service.core.embedding_models import DEFAULT_MODEL, MODELS
from service.core.settings import Settings
from service.identity.gate import ResolutionGate
from service.identity.rules import NameVectors
from service.stores.neo4j.store import Neo4jGraphStore

# The local embedders' files, shared by every test run on this machine (scripts/test.sh fetches the default model's,
# all-MiniLM-L6-v2's graph is built once; both checked by sha256).
MODEL_CACHE = Path(__file__).resolve().parents[1] / ".test-stack" / "models"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (scripts/test.sh, TEST_WORKERS > 1) each test process uses its own Redis and Neo4j:
    TEST_REDIS_URLS and TEST_NEO4J_URIS list one per process, in worker order (gw0, gw1, ...)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    index = int(worker[2:])
    for many, one in (("TEST_REDIS_URLS", "TEST_REDIS_URL"), ("TEST_NEO4J_URIS", "TEST_NEO4J_URI")):
        urls = [u for u in os.environ.get(many, "").split(",") if u]
        if urls:
            os.environ[one] = urls[index % len(urls)]


# Files whose tests mostly wait (fault windows, private Redis/Neo4j/service processes, subprocesses), longest first.
# They run first, so that under pytest-xdist (scripts/test.sh, TEST_WORKERS=2, --dist loadfile
# --no-loadscope-reorder: a process takes the next file when it is free) their waits overlap the other process's
# CPU-bound files instead of ending the run alone. The order changes nothing else: each file keeps its tests' order.
SLOW_FIRST = (
    "integration/test_write_faults.py",
    "integration/test_redis_failover.py",
    "integration/test_worker_process.py",
    "integration/test_write_integrity.py",
    "integration/test_slowness.py",
    "integration/test_bench_smoke.py",
    "integration/test_cli.py",
    "integration/test_faults.py",
    "integration/test_client.py",
    "integration/test_resolution_bench.py",
    "integration/test_fuzz.py",
    "integration/test_recall_harness.py",
    "integration/test_conversations.py",
    "integration/test_mcp.py",
    "integration/test_shards.py",
    "integration/test_graph_scale.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """SLOW_FIRST's files first (stable: the rest keep their collection order)."""
    def rank(item: pytest.Item) -> int:
        path = item.path.as_posix()
        return next((i for i, tail in enumerate(SLOW_FIRST) if path.endswith("tests/" + tail)), len(SLOW_FIRST))

    items.sort(key=rank)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def local_embedder(batch_size: int = 64, model: str = DEFAULT_MODEL) -> LocalEmbedder:
    """A registered local embedder (default: the service's default model) on ONNX Runtime, as the service builds
    it."""
    return LocalEmbedder(ModelFiles.registered(MODELS[model], MODEL_CACHE), batch_size=batch_size)


@contextlib.asynccontextmanager
async def gated_graph_store() -> AsyncIterator[Neo4jGraphStore]:
    """A Neo4j graph store on the test database with the resolution gate on (auto-merge 0.95, pending 0.85)."""
    store = Neo4jGraphStore(os.environ["TEST_NEO4J_URI"], "neo4j", None,
                            os.environ.get("TEST_NEO4J_DATABASE", "memory"), 10,
                            NameVectors(local_embedder(),
                                        ResolutionGate(0.95, 0.85, scale=MODELS[DEFAULT_MODEL].calibration)))
    await store.ensure_schema()
    try:
        yield store
    finally:
        await store.close()


def make_settings(tmp: Path, **overrides: Any) -> Settings:
    """Settings for a test app: own queue, own Qdrant dir, hash embedder, test Redis/Neo4j."""
    base: dict[str, Any] = {
        "redis_url": os.environ.get("TEST_REDIS_URL", ""),
        "neo4j_uri": os.environ.get("TEST_NEO4J_URI", ""),
        "neo4j_database": os.environ.get("TEST_NEO4J_DATABASE", "memory"),
        "neo4j_password": None,
        "data_dir": tmp,
        "qdrant_path": tmp / "qdrant",
        "arq_queue_name": unique("test:queue"),
        "embedder": "hash",
        "worker_process": "inline",  # test apps run their worker in-process (create_app with EmbeddedWorker)
        "log_format": "console",
        "log_level": "WARNING",
        "arq_job_timeout": 30,
        "dedup_cron_enabled": False,  # a session crossing 00/06/12/18 UTC must not sweep shared apps
        "reconcile_cron_enabled": False,
        "reconcile_interval_seconds": 2,  # the outbox drain and the reaper, fast enough to wait for
        "reconcile_grace_seconds": 1,
    }
    base.update(overrides)
    return Settings(_env_file=None, **base)  # type: ignore[call-arg]


@pytest.fixture
def hanging_url() -> Iterator[str]:
    """A listening socket that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        deadline = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()
