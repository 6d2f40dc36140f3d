"""The start-up heap, taken out of the garbage collector's reach (`gc.freeze`).

A started service holds about 150,000 long-lived objects (modules, the FastAPI routes, dateparser's and the
offline extractor's data, the stores' clients). CPython's full collections walk all of them: 80-100 ms on
this machine kind, during which the event loop answers nothing; under 1,000 writes/s that was a 100 ms
stall in every run (docs/benchmarks.md, "Accepting at 1,000/s"). Frozen after start-up, they are never
walked again; what the process allocates later is collected as before. Only the processes' entry points
call it (`python -m service`, `python -m worker`, the worker child): a test process creates many apps and
must be able to collect them.
"""

from __future__ import annotations

import gc
import time

import structlog

log = structlog.get_logger(__name__)


def freeze_startup_heap() -> None:
    started = time.perf_counter()
    gc.collect()  # start-up garbage is freed, not frozen
    gc.freeze()
    log.info("heap_frozen", objects=gc.get_freeze_count(), ms=round((time.perf_counter() - started) * 1000, 1))
