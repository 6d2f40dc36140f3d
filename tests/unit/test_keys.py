"""Every Redis key name is composed in service/core/keys.py, and the names are the ones data on disk already has
(a renamed key would orphan every deployment's tasks, outbox and keys)."""

from __future__ import annotations

import re
from pathlib import Path

from service.core.keys import Keys, fold_pointer, idempotency_record, reembed_state, run_accepted

ROOT = Path(__file__).resolve().parents[2]


def test_the_names_are_the_stored_ones() -> None:
    k = Keys("memory-jobs")
    assert [k.task("t1"), k.task_step("t1", "extract"), k.accepted("h"), k.pending, k.lease("t1"), k.user_tasks("u"),
            k.memory_tasks("m"), k.shard_counts, k.shard_queue(2)] == [
        "memory-jobs:task:t1", "memory-jobs:task:t1:extract", "memory-jobs:idem:h", "memory-jobs:pending",
        "memory-jobs:lease:t1", "memory-jobs:utasks:u", "memory-jobs:mtasks:m", "memory-jobs:shard-counts",
        "memory-jobs:shard:2"]
    assert [k.blob("b"), k.stats, k.loops, k.outbox, k.outbox_at, k.tombstones, k.memory_lock("m")] == [
        "memory-jobs:blob:b", "memory-jobs:stats", "memory-jobs:loops", "memory-jobs:outbox", "memory-jobs:outbox:at",
        "memory-jobs:tombstones", "memory-jobs:mlock:m"]
    assert [k.retrieved("u"), k.dedup_lock, k.dedup_runs, k.dedup_run("r"), k.dedup_graph_pending, k.api_key("id"),
            k.rate("write", "u", 7), k.llm_modes] == [
        "memory-jobs:retrieved:u", "memory-jobs:dedup:lock", "memory-jobs:dedup:runs", "memory-jobs:dedup:run:r",
        "memory-jobs:dedup:graph_pending", "memory-jobs:apikey:id", "memory-jobs:rate:write:u:7",
        "memory-jobs:llm-modes"]
    assert [idempotency_record("u", "d"), run_accepted("u", "r"), fold_pointer("u", None, "s"),
            reembed_state("e5-small-v2@onnx-int8", None)] == ["idkey:u:d", "run:u:r", "fold:u:-:s",
                                                              "reembed:e5-small-v2@onnx-int8:*"]


def test_no_other_module_composes_a_key_from_the_queue_name() -> None:
    composed = re.compile(r"f\"\{[\w.]*queue_name\}:|queue_name \+ \"")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "service").rglob("*.py")) + sorted(
        (ROOT / "worker").rglob("*.py")) if p.name != "keys.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if composed.search(line)]
    assert found == [], found
