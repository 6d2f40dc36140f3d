"""What every benchmark shares: one percentile definition, so every table in docs/benchmarks.md is computed
the same way. Process helpers (free ports, starting Redis / Neo4j / the service) are in
tests/integration/procs.py, shared by the tests and the benchmarks that start their own stack."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog

# The shared name pool of the write-path benches (soak, chaos): few names, so concurrent jobs contend on
# the same graph entities, as one user's memories do.
PEOPLE = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy")
PLACES = ("Lisbon", "Berlin", "Osaka", "Toronto", "Nairobi")
TOOLS = ("PostgreSQL", "Rust", "Python", "Redis", "Docker", "Kubernetes", "Neo4j", "FastAPI")
RAW_CATEGORIES = ("preference", "personal_fact", "technical_skill", "domain_knowledge", "decision", "interaction")


HTTP_ERRORS = (aiohttp.ClientError, TimeoutError)  # what a request of the load client may raise

# Neo4j's JVM memory, asked over Bolt (JMX, database "system" or any): the heap's and the non-heap's
# used / committed / max, in bytes (search.py prints the heap, footprint.py samples both during a soak).
NEO4J_JMX_MEMORY = ("CALL dbms.queryJmx('java.lang:type=Memory') YIELD attributes "
                    "RETURN attributes.HeapMemoryUsage.value.properties AS heap, "
                    "attributes.NonHeapMemoryUsage.value.properties AS nonheap")


@dataclass
class Answer:
    """An HTTP answer of the load client, read in full."""

    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


async def fetch(client: aiohttp.ClientSession, method: str, path: str, **kw: Any) -> Answer:
    """One request of the benchmarks' load client (aiohttp: a tenth of httpx's CPU per request); raises
    HTTP_ERRORS."""
    async with client.request(method, path, **kw) as resp:
        return Answer(resp.status, await resp.text())


async def fetch_retrying(
    client: aiohttp.ClientSession, method: str, path: str, *, tries: int, pause_s: Callable[[int], float],
    retry_statuses: tuple[int, ...] = (), retry_errors: tuple[type[Exception], ...] = (),
    on_retry: Callable[[], None] = lambda: None, **kw: Any,
) -> Answer:
    """The load client's request, sent again (at most `tries` times in all, `pause_s(attempt)` apart) while it
    answers one of `retry_statuses` or raises one of `retry_errors`: the last answer, or the last error raised.
    `on_retry` counts each resend."""
    for attempt in range(tries):
        last = attempt + 1 == tries
        try:
            answer = await fetch(client, method, path, **kw)
        except retry_errors:
            if last:
                raise
        else:
            if answer.status_code not in retry_statuses or last:
                return answer
        on_retry()
        await asyncio.sleep(pause_s(attempt))
    raise AssertionError("unreachable")  # the last try returns or raises


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (the smallest value with at least q % of the values at or below it);
    0.0 for an empty list."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def local_embedder(batch_size: int = 64, model: str | None = None) -> Any:
    """A registered local embedder (default: the service's default model) on ONNX Runtime, its files in
    MODEL_CACHE_DIR when set, else the test stack's model cache (`./scripts/test.sh` fetches them there;
    `python -m service models fetch` puts them into MODEL_CACHE_DIR)."""
    from pathlib import Path

    from service.ai.local import LocalEmbedder, ModelFiles
    from service.core.embedding_models import DEFAULT_MODEL, MODELS

    cache = Path(os.environ.get("MODEL_CACHE_DIR") or Path(__file__).resolve().parents[2] / ".test-stack" / "models")
    return LocalEmbedder(ModelFiles.registered(MODELS[model or DEFAULT_MODEL], cache), batch_size=batch_size)


async def embedder_rate(kind: str, texts: list[str], batch: int = 64) -> tuple[str, float, float]:
    """The raw embedder's texts/s in this process (the yardstick of the write path's throughput) and the CPU it
    spends per text (ms, every thread of this process: the embedder's share of a memory's CPU budget):
    (name, rate, cpu ms per text)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep model-loading chatter out of the figures
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from service.ai.hashing import HashEmbedder
    from service.ai.local import LocalEmbedder

    embedder: HashEmbedder | LocalEmbedder = local_embedder(batch) if kind == "local" else HashEmbedder()
    await embedder.embed(texts[:batch])  # warm-up: loads the model and runs the first forward pass
    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in range(0, len(texts), batch):
        await embedder.embed(texts[i : i + batch])
    wall, cpu = max(time.perf_counter() - t0, 1e-9), time.process_time() - cpu0
    return embedder.name, len(texts) / wall, cpu * 1000 / max(len(texts), 1)


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process and its live descendants have used so far, from /proc (Linux);
    0.0 for a process that is gone. Read before and after a load to see where a memory's CPU goes."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, cpu seconds)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after "(comm)", which may hold spaces
        except OSError:
            continue
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)  # ppid; utime + stime
    tree, total = {pid}, 0.0
    for _ in range(8):  # bounded: process trees here are a few levels deep
        grown = tree | {p for p, (parent, _) in stats.items() if parent in tree}
        if grown == tree:
            break
        tree = grown
    for p in tree:
        total += stats.get(p, (0, 0.0))[1]
    return total
