"""Qdrant Edge's index build runs in a child process on a copy of the shard, then the copy is swapped in:
searches keep answering meanwhile, writes made during the build survive the swap, and a crash in the
swap is undone at the next start."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from pathlib import Path

import pytest

from service.core.domain import Memory, Scope
from service.stores.qdrant_edge import EdgeVectorStore
from service.stores.vector import MemoryFilter
from tests.vector_probe import search

pytestmark = pytest.mark.unit
DIM = 32


def memory(i: int, user: str = "alice") -> Memory:
    return Memory(id=str(uuid.uuid4()), user_id=user, content=f"note {i} about topic {i % 17}", category="interaction",
                  scope=Scope.GLOBAL, hash=f"h{i}", created_at="2025-01-01T00:00:00+00:00",
                  updated_at="2025-01-01T00:00:00+00:00")


def vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


async def test_optimize_in_a_child_process_while_searches_and_writes_go_on(tmp_path: Path) -> None:
    rng = random.Random(7)
    store = EdgeVectorStore(tmp_path, "memories")
    await store.ensure_collection(DIM, "test")
    first = [memory(i) for i in range(3000)]
    await store.upsert(first, [vector(rng) for _ in first])
    assert await store.index_backlog() == len(first)  # never built
    probe = vector(rng)
    before = [h.memory.id for h in await search(store, probe, MemoryFilter("alice"), 5)]

    done = asyncio.Event()
    answered: list[float] = []
    during = [memory(10_000 + i) for i in range(50)]

    async def searches() -> None:
        for _ in range(100_000):  # bounded; stops when the build is done
            if done.is_set():
                return
            t0 = time.perf_counter()
            hits = await search(store, probe, MemoryFilter("alice"), 5)
            assert hits
            answered.append(time.perf_counter() - t0)
            await asyncio.sleep(0.005)

    async def writes() -> None:
        for m in during:
            await store.upsert([m], [vector(rng)])
            await asyncio.sleep(0.01)
        await store.delete([first[0].id])

    async def build() -> bool:
        try:
            return await store.optimize()
        finally:
            done.set()

    changed, _, _ = await asyncio.gather(build(), searches(), writes())
    assert isinstance(changed, bool)
    assert len(answered) > 5, "searches kept answering while the index was built"
    assert store.last_optimize["points"] >= len(first)
    # the backlog is what the build did not see: the writes and the delete made while it ran
    assert 0 <= await store.index_backlog() <= len(during) + 1
    # every write made during the build is in the swapped-in shard
    got = {m.id for m in await store.get([m.id for m in during])}
    assert got == {m.id for m in during}
    assert await store.count() == len(first) + len(during) - 1
    after = [h.memory.id for h in await search(store, probe, MemoryFilter("alice"), 5)]
    assert set(after) & set(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]  # no .next / .old / .swap left
    await store.close()
    again = EdgeVectorStore(tmp_path, "memories")
    await again.ensure_collection(DIM, "test")
    assert await again.count() == len(first) + len(during) - 1
    await again.close()


async def test_a_swap_cut_short_is_undone_at_start(tmp_path: Path) -> None:
    """A crash after the directories were swapped but before the journal was replayed: the next start goes
    back to the old shard, which holds every update."""
    rng = random.Random(3)
    store = EdgeVectorStore(tmp_path, "memories")
    await store.ensure_collection(DIM, "test")
    ms = [memory(i) for i in range(20)]
    await store.upsert(ms, [vector(rng) for _ in ms])
    await store.close()
    live, old = tmp_path / "memories", tmp_path / "memories.old"
    live.rename(old)
    (tmp_path / "memories.next").mkdir()  # a half-built copy
    live.mkdir()  # the "optimized" copy that lacks the journal
    (tmp_path / "memories.swap").touch()
    again = EdgeVectorStore(tmp_path, "memories")
    await again.ensure_collection(DIM, "test")
    assert await again.count() == len(ms)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]
    await again.close()


async def test_deletes_count_in_the_backlog_and_it_survives_a_restart(tmp_path: Path) -> None:
    """Edge only tombstones a deleted point: a shard whose size stays the same under write/delete churn still
    grows until a build vacuums it, so deletes count toward the build."""
    rng = random.Random(5)
    store = EdgeVectorStore(tmp_path, "memories")
    await store.ensure_collection(DIM, "test")
    for round_ in range(3):
        batch = [memory(100 * round_ + i) for i in range(40)]
        await store.upsert(batch, [vector(rng) for _ in batch])
        await store.delete([m.id for m in batch])
    assert await store.count() == 0
    assert await store.index_backlog() == 3 * 80
    await store.close()
    again = EdgeVectorStore(tmp_path, "memories")
    await again.ensure_collection(DIM, "test")
    assert await again.index_backlog() == 3 * 80
    await again.optimize()
    assert await again.index_backlog() == 0
    await again.close()
    third = EdgeVectorStore(tmp_path, "memories")
    await third.ensure_collection(DIM, "test")
    assert await third.index_backlog() == 0
    await third.close()


async def test_a_sidecar_from_before_deletes_were_counted_gives_the_points_outside_the_index(tmp_path: Path) -> None:
    rng = random.Random(6)
    store = EdgeVectorStore(tmp_path, "memories")
    await store.ensure_collection(DIM, "test")
    ms = [memory(i) for i in range(30)]
    await store.upsert(ms, [vector(rng) for _ in ms])
    await store.close()
    sidecar = tmp_path / "memories" / "memory_store.json"
    body = json.loads(sidecar.read_text())
    del body["changes_since_build"]
    body["indexed_points"] = 10
    sidecar.write_text(json.dumps(body))
    again = EdgeVectorStore(tmp_path, "memories")
    await again.ensure_collection(DIM, "test")
    assert await again.index_backlog() == 20
    await again.close()



async def test_every_field_a_search_filter_tests_has_a_payload_index(tmp_path: Path) -> None:
    """A condition on a field without a payload index reads every candidate's payload: `active_only` (every
    search) tests `superseded_by` with is_empty, which made the fused search several times slower."""
    import qdrant_edge as qe

    from service.core.sensitivity import Sensitivity
    from service.stores.edge_layout import config
    from service.stores.qdrant_common import FilterBuilder
    from service.stores.vector import TIME_FIELD

    def keys(*parts: object) -> set[str]:  # the field names a filter's conditions name
        out: set[str] = set()
        for part in parts:
            out |= keys(*part) if isinstance(part, (list, tuple, set)) else {str(part)}
        return out

    names: FilterBuilder[object, object] = FilterBuilder(
        eq=lambda k, v: k, any_of=lambda k, vs: k, all_of=keys, one_of=keys,
        time_range=lambda k, gte, lt: k, is_empty=lambda k: k)
    flt = MemoryFilter(user_id="alice", project_id="p", categories=("preference",), agent_id="a",
                       after="2025-01-01T00:00:00+00:00", active_only=True, max_sensitivity=Sensitivity.INTERNAL)
    tested = names.build(flt)
    assert isinstance(tested, set) and "superseded_by" in tested

    store = EdgeVectorStore(tmp_path, "memories")
    await store.ensure_collection(DIM, "test")
    await store.close()
    shard = qe.EdgeShard.load(str(tmp_path / "memories"), config(DIM))
    indexed = set(shard.info().payload_schema)
    shard.close()
    assert tested <= indexed and TIME_FIELD in indexed, tested - indexed
