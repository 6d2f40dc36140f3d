"""What every benchmark shares: one percentile definition, so every table in docs/benchmarks.md is computed
the same way. Process helpers (free ports, starting Redis / Neo4j / the service) are in
tests/integration/procs.py, shared by the tests and the benchmarks that start their own stack."""

from __future__ import annotations

import logging
import math
import os
import time

import structlog

# The shared name pool of the write-path benches (soak, chaos): few names, so concurrent jobs contend on
# the same graph entities, as one user's memories do.
PEOPLE = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy")
PLACES = ("Lisbon", "Berlin", "Osaka", "Toronto", "Nairobi")
TOOLS = ("PostgreSQL", "Rust", "Python", "Redis", "Docker", "Kubernetes", "Neo4j", "FastAPI")
RAW_CATEGORIES = ("preference", "personal_fact", "technical_skill", "domain_knowledge", "decision", "interaction")


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (the smallest value with at least q % of the values at or below it);
    0.0 for an empty list."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


async def embedder_rate(kind: str, texts: list[str], batch: int = 64) -> tuple[str, float]:
    """The raw embedder's texts/s in this process (the yardstick of the write path's throughput): (name, rate)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep model-loading chatter out of the figures
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from service.ai.hashing import HashEmbedder
    from service.ai.local import LocalEmbedder

    embedder: HashEmbedder | LocalEmbedder = LocalEmbedder(batch_size=batch) if kind == "local" else HashEmbedder()
    await embedder.embed(texts[:batch])  # warm-up: loads the model and runs the first forward pass
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        await embedder.embed(texts[i : i + batch])
    return embedder.name, len(texts) / max(time.perf_counter() - t0, 1e-9)
