"""The start-up heap freeze and the GC pause metric (service/core/heap.py)."""

from __future__ import annotations

import gc
import weakref

import pytest
from prometheus_client import REGISTRY

from service.core.heap import freeze_startup_heap, track_gc_pauses

pytestmark = pytest.mark.unit


def _pauses(generation: int) -> float:
    return REGISTRY.get_sample_value("process_gc_pause_seconds_count", {"generation": str(generation)}) or 0.0


def test_every_collection_is_observed_once_by_generation() -> None:
    track_gc_pauses()
    track_gc_pauses()  # idempotent: one callback, one observation per collection
    before = _pauses(2)
    gc.collect(2)
    gc.collect(2)
    assert _pauses(2) - before == 2


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_frozen_objects_are_left_alone_and_later_garbage_is_still_collected() -> None:
    held = _Node()
    try:
        freeze_startup_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # this test process's heap, the node above included
        later = _Node()
        gone = weakref.ref(later)
        del later
        gc.collect()
        assert gone() is None  # a cycle made after the freeze is collected as before
        assert gc.get_freeze_count() == frozen  # and the frozen heap is not walked (nor thawed) by it
        assert held.me is held
    finally:
        gc.unfreeze()  # give this test process its heap back
    assert gc.get_freeze_count() == 0
