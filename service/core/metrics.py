"""Prometheus metrics (prometheus-client): what the API and the worker do, with low-cardinality labels only
(never a user id, a memory id or a task id).

The API serves them at `GET /metrics` (an admin key or `METRICS_TOKEN` under AUTH_MODE=keys); a standalone
worker serves its own on `WORKER_METRICS_PORT`. Queue and outbox gauges are read from Redis when scraped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

HTTP_DURATION = Histogram(
    "http_request_duration_seconds", "HTTP request duration by route template, method and status",
    ["route", "method", "status"],
)
GC_PAUSE = Histogram(
    "process_gc_pause_seconds", "Garbage-collector pauses of this process by generation (every thread stops)",
    ["generation"], buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
QUEUE_DEPTH = Gauge("memory_queue_depth", "Jobs waiting in the ARQ queue")
QUEUE_OLDEST = Gauge("memory_queue_oldest_age_seconds", "Age of the oldest task not ended yet")
OUTBOX_DEPTH = Gauge("memory_outbox_depth", "Write intents not yet held by both stores")
JOBS = Counter("memory_jobs_total", "Jobs by kind and outcome (completed, retried, failed, skipped, interrupted)",
               ["kind", "outcome"])
JOB_DURATION = Histogram("memory_job_duration_seconds", "Job duration by kind", ["kind"])
LOOP_LAG = Gauge("event_loop_lag_seconds", "How late the event loop woke its last 0.25 s sleep, by process role",
                 ["role"])
LOOP_LAG_SAMPLES = Histogram("event_loop_lag_sample_seconds", "Event-loop lag samples by process role", ["role"],
                             buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
WORKER_JOBS_ALLOWED = Gauge("memory_worker_jobs_allowed",
                            "Jobs the worker takes at once now (ARQ_MAX_JOBS, fewer while its event loop lags)")
STAGE = Histogram("memory_job_stage_seconds", "Time in each stage of a write", ["stage"])
WRITE_EMBED_CALLS = Counter("memory_write_embed_calls_total",
                            "Embedder calls of the worker's memory writes, by the stage that made them", ["stage"])
WRITE_EMBED_TEXTS = Counter("memory_write_embedded_texts_total",
                            "Texts the worker's memory writes embedded, by the stage that embedded them", ["stage"])
LLM_CALLS = Counter("memory_llm_calls_total", "LLM calls by stage, model and outcome", ["stage", "model", "outcome"])
LLM_TOKENS = Counter("memory_llm_tokens_total", "LLM tokens by stage, model and kind (prompt, output)",
                     ["stage", "model", "kind"])
DEDUP_REMOVED = Counter("memory_dedup_removed_total", "Memories removed by the dedup sweep", ["phase"])
ENTITY_RESOLUTIONS = Counter("memory_entity_resolutions_total",
                             "New entities by the resolution gate's decision (merge, pending, create)", ["action"])
RECONCILE_REPAIRS = Counter("memory_reconcile_repairs_total", "Repairs by the reconciler", ["kind"])
SEARCH_DURATION = Histogram("memory_search_duration_seconds",
                            "Search time by retriever (dense, lexical, graph, time; fused = the whole search)",
                            ["retriever"])


@contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        histogram.labels(**labels).observe(time.perf_counter() - started)


def exposition() -> tuple[bytes, str]:
    """The current metrics in the Prometheus text format, and its content type."""
    return generate_latest(), CONTENT_TYPE_LATEST
