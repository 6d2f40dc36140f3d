"""The start-up heap, taken out of the garbage collector's reach (`gc.freeze`), and the collector's pauses.

A started service holds hundreds of thousands of long-lived objects: modules, the FastAPI routes, dateparser's
and the offline extractor's data, the model runtime, the stores' clients. CPython's full collections walk all of
them, for a pause long enough to be seen in request latencies (figures: docs/benchmarks.md), and no thread of the
process runs meanwhile: the event loop answers nothing. Frozen after start-up, they are never walked again; what
the process allocates later is collected as before. Only the processes' entry points freeze (`python -m service`,
`python -m worker`, the worker child): a test process creates many apps and must be able to collect them.

Every pause is observed in `process_gc_pause_seconds{generation}` (docs/benchmarks.md, "Accepting at
1,000/s").
"""

from __future__ import annotations

import gc
import time

import structlog

from service.core.metrics import GC_PAUSE

log = structlog.get_logger(__name__)
_pause_started = [0.0]  # the collector runs with the GIL held and is not re-entered: one start time


def _observe_pause(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _pause_started[0] = time.perf_counter()
    else:
        GC_PAUSE.labels(generation=str(info["generation"])).observe(time.perf_counter() - _pause_started[0])


def track_gc_pauses() -> None:
    """Observe every collection of this process in GC_PAUSE (idempotent)."""
    if _observe_pause not in gc.callbacks:
        gc.callbacks.append(_observe_pause)


def freeze_startup_heap() -> None:
    started = time.perf_counter()
    gc.collect()  # start-up garbage is freed, not frozen
    gc.freeze()
    log.info("heap_frozen", objects=gc.get_freeze_count(), ms=round((time.perf_counter() - started) * 1000, 1))
