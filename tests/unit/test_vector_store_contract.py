"""One contract, two adapters: Qdrant Edge (embedded shard) and qdrant-client (local mode as the
stand-in for a Qdrant server). Every test runs against both through the `backend` fixture, and a third time
against Qdrant Edge reached across a Unix socket (service/stores/remote.py: the worker process's store,
WORKER_PROCESS=child)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from service.core.domain import ListOrder, Memory, Scope, utc
from service.core.errors import DependencyUnavailable, DomainError, StoreConfigError
from service.core.sensitivity import Sensitivity, lowered
from service.stores.qdrant_edge import EdgeVectorStore
from service.stores.qdrant_server import QdrantServerVectorStore
from service.stores.remote import RemoteVectorStore, VectorServer
from service.stores.vector import Boundary, MemoryFilter, RankRequest, VectorStore
from tests.vector_probe import search, search_text

DIM = 8
EMBEDDER = "test-embedder"
COLLECTION = "contract_memories"
REPO = Path(__file__).resolve().parents[2]


def unit(i: int, j: int | None = None, w: float = 0.0) -> list[float]:
    """Basis vector e_i, optionally tilted towards e_j by weight w."""
    v = [0.0] * DIM
    v[i] = 1.0
    if j is not None:
        v[j] = w
    return v


def mem(
    user: str = "alice",
    content: str = "likes tea",
    *,
    category: str = "preference",
    scope: Scope = Scope.GLOBAL,
    project_id: str | None = None,
    agent_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    mid: str | None = None,
) -> Memory:
    return Memory(
        id=mid or str(uuid.uuid4()),
        user_id=user,
        content=content,
        category=category,
        scope=scope,
        project_id=project_id,
        agent_id=agent_id,
        hash=f"h-{content}",
        metadata=metadata or {},
        created_at="2025-01-01T00:00:00Z",
        updated_at="2025-01-02T00:00:00Z",
        task_id="task-1",
    )


class Backend:
    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root
        self.opened: list[VectorStore] = []
        self.server: VectorServer | None = None  # "remote": the parent's side, serving an Edge shard

    def open(self) -> VectorStore:
        store: VectorStore
        if self.server is not None:
            store = RemoteVectorStore(self.server.path, self.server.token)
        elif self.kind == "edge":
            store = EdgeVectorStore(self.root / "edge", COLLECTION)
        else:
            store = QdrantServerVectorStore(None, COLLECTION, local_path=self.root / "local")
        self.opened.append(store)
        return store

    async def ready(self) -> VectorStore:
        store = self.open()
        await store.ensure_collection(DIM, EMBEDDER)
        return store


@pytest.fixture(params=["edge", "qdrant_local", "remote"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    b = Backend(request.param, tmp_path)
    parent = EdgeVectorStore(tmp_path / "edge", COLLECTION)
    if b.kind == "remote":
        b.server = VectorServer(parent, tmp_path / "vectors.sock")
        await b.server.start()
    yield b
    for s in b.opened:
        await s.close()
    if b.server is not None:
        await b.server.close()
    await parent.close()


@pytest.fixture
async def store(backend: Backend) -> VectorStore:
    return await backend.ready()


async def ids_of(store: VectorStore, flt: MemoryFilter, limit: int = 100) -> set[str]:
    page, _ = await store.scroll(flt, limit)
    return {m.id for m in page}


# -------------------------------------------------------------------------------------------
# collection lifecycle
# -------------------------------------------------------------------------------------------


async def test_ensure_collection_is_idempotent(backend: Backend) -> None:
    store = await backend.ready()
    await store.ensure_collection(DIM, EMBEDDER)
    await store.upsert([mem()], [unit(0)])
    await store.ensure_collection(DIM, EMBEDDER)
    assert await store.count() == 1
    await store.ping()
    await store.close()
    again = await backend.ready()
    await again.ensure_collection(DIM, EMBEDDER)
    assert await again.count() == 1


async def test_dimension_mismatch_is_a_config_error(backend: Backend) -> None:
    store = await backend.ready()
    with pytest.raises(StoreConfigError):
        await store.ensure_collection(DIM + 1, EMBEDDER)
    with pytest.raises(StoreConfigError):
        await store.upsert([mem()], [[1.0] * (DIM + 1)])
    await store.close()
    other = backend.open()
    with pytest.raises(StoreConfigError) as err:
        await other.ensure_collection(DIM * 2, EMBEDDER)
    msg = str(err.value)
    assert str(DIM) in msg and str(DIM * 2) in msg and "QDRANT_COLLECTION" in msg


async def test_embedder_mismatch_is_a_config_error(backend: Backend) -> None:
    await (await backend.ready()).close()
    other = backend.open()
    with pytest.raises(StoreConfigError) as err:
        await other.ensure_collection(DIM, "another-embedder")
    msg = str(err.value)
    assert EMBEDDER in msg and "another-embedder" in msg and "python -m service reembed" in msg


async def test_embedder_variants_and_a_recorded_change(backend: Backend) -> None:
    """Variants declared compatible share a store; another model starts only when allowed, recorded as the
    target of a re-embed until `record_embedder` says every vector is the new model's."""
    store = await backend.ready()  # written by EMBEDDER with no variant: takes the first variant it is opened with
    await store.ensure_collection(DIM, EMBEDDER, "onnx-fp32", frozenset({"onnx-fp32", "torch"}))
    assert (await store.recorded_embedder())["variant"] == "onnx-fp32"
    await store.ensure_collection(DIM, EMBEDDER, "torch", frozenset({"onnx-fp32", "torch"}))  # declared compatible
    with pytest.raises(StoreConfigError, match="reembed"):
        await store.ensure_collection(DIM, EMBEDDER, "int4", frozenset({"onnx-fp32", "torch"}))  # not declared
    with pytest.raises(StoreConfigError):
        await store.ensure_collection(DIM, "bigger-model", "onnx")
    await store.ensure_collection(DIM, "bigger-model", "onnx", allow_change=True)
    recorded = await store.recorded_embedder()
    assert recorded["embedder"] == EMBEDDER and recorded["reembed_to"] == {"embedder": "bigger-model",
                                                                           "variant": "onnx"}
    await store.ensure_collection(DIM, "bigger-model", "onnx")  # the change under way needs no flag again
    await store.record_embedder(DIM, "bigger-model", "onnx")
    recorded = await store.recorded_embedder()
    assert (recorded["embedder"], recorded["dim"], recorded["variant"]) == ("bigger-model", DIM, "onnx")
    assert not recorded.get("reembed_to")
    with pytest.raises(StoreConfigError):
        await store.ensure_collection(DIM, EMBEDDER)  # the old model is the other one now


async def test_unusable_before_ensure_and_after_close(backend: Backend) -> None:
    store = backend.open()
    if backend.kind == "edge":  # qdrant-client local mode has nothing to open lazily
        with pytest.raises(DependencyUnavailable):
            await store.ping()
    await store.ensure_collection(DIM, EMBEDDER)
    await store.ping()
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(DependencyUnavailable):
        await store.ping()
    with pytest.raises(DependencyUnavailable):
        await store.count()


# -------------------------------------------------------------------------------------------
# writes and reads
# -------------------------------------------------------------------------------------------


async def test_upsert_then_get_round_trips_every_field(store: VectorStore) -> None:
    a = mem(
        content="uses uv",
        category="tech_stack",
        scope=Scope.PROJECT,
        project_id="p1",
        agent_id="cli",
        metadata={"source": "chat", "n": 3, "ok": True, "nested": {"xs": [1, "two", None]}},
    )
    b = mem(content="likes tea")
    await store.upsert([a, b], [unit(0), unit(1)])
    got = await store.get([a.id, b.id, str(uuid.uuid4()), "not-a-uuid"])
    assert sorted(got, key=lambda m: m.id) == sorted([a, b], key=lambda m: m.id)
    assert await store.get([]) == []


async def test_upsert_same_id_twice_keeps_one_point(store: VectorStore) -> None:
    m = mem(content="first")
    await store.upsert([m], [unit(0)])
    await store.upsert([m.model_copy(update={"content": "second"})], [unit(1)])
    assert await store.count() == 1
    assert [x.content for x in await store.get([m.id])] == ["second"]
    hits = await search(store, unit(1), MemoryFilter("alice"), 5)
    assert [h.memory.id for h in hits] == [m.id] and math.isclose(hits[0].score, 1.0, abs_tol=1e-5)


async def test_search_ranks_nearest_first(store: VectorStore) -> None:
    exact, near, far, opposite = mem(content="exact"), mem(content="near"), mem(content="far"), mem(content="opp")
    await store.upsert(
        [far, exact, opposite, near],
        [unit(2), unit(0), [-1.0] + [0.0] * (DIM - 1), unit(0, 1, 0.5)],
    )
    hits = await search(store, unit(0), MemoryFilter("alice"), 10)
    assert [h.memory.content for h in hits] == ["exact", "near", "far", "opp"]
    assert math.isclose(hits[0].score, 1.0, abs_tol=1e-5)
    assert math.isclose(hits[1].score, 1 / math.sqrt(1.25), abs_tol=1e-5)
    assert math.isclose(hits[2].score, 0.0, abs_tol=1e-5)
    assert math.isclose(hits[3].score, -1.0, abs_tol=1e-5)
    assert hits[0].memory == exact
    top2 = await search(store, unit(0), MemoryFilter("alice"), 2)
    assert [h.memory.content for h in top2] == ["exact", "near"]


async def test_delete_is_idempotent(store: VectorStore) -> None:
    a, b = mem(content="a"), mem(content="b")
    await store.upsert([a, b], [unit(0), unit(1)])
    await store.delete([a.id, str(uuid.uuid4()), "not-a-uuid"])
    await store.delete([a.id])
    await store.delete([])
    assert await store.count() == 1
    assert await store.get([a.id]) == []
    assert [h.memory.id for h in await search(store, unit(0), MemoryFilter("alice"), 10)] == [b.id]


# -------------------------------------------------------------------------------------------
# filters
# -------------------------------------------------------------------------------------------


async def test_user_isolation(store: VectorStore) -> None:
    a = mem("alice", "alice global")
    ap = mem("alice", "alice project", category="convention", scope=Scope.PROJECT, project_id="p1")
    await store.upsert([a, ap], [unit(0), unit(0)])
    for flt in (
        MemoryFilter("bob"),
        MemoryFilter("bob", project_id="p1"),
        MemoryFilter("bob", scope=Scope.PROJECT),
    ):
        assert await search(store, unit(0), flt, 10) == []
        assert await store.scroll(flt, 10) == ([], None)
        assert await store.count(flt) == 0
    assert await store.count(MemoryFilter("alice", project_id="p1")) == 2
    assert await store.count() == 2


async def test_scope_rule(store: VectorStore) -> None:
    g = mem(content="global")
    p1 = mem(content="p1", category="convention", scope=Scope.PROJECT, project_id="p1")
    p2 = mem(content="p2", category="convention", scope=Scope.PROJECT, project_id="p2")
    await store.upsert([g, p1, p2], [unit(0), unit(1), unit(2)])

    with_project = MemoryFilter("alice", project_id="p1")
    assert await ids_of(store, with_project) == {g.id, p1.id}
    assert {h.memory.id for h in await search(store, unit(2), with_project, 10)} == {g.id, p1.id}
    assert await store.count(with_project) == 2

    without_project = MemoryFilter("alice")
    assert await ids_of(store, without_project) == {g.id}
    assert {h.memory.id for h in await search(store, unit(1), without_project, 10)} == {g.id}

    assert await ids_of(store, MemoryFilter("alice", project_id="p3")) == {g.id}
    assert await ids_of(store, MemoryFilter("alice", project_id="p1", scope=Scope.GLOBAL)) == {g.id}
    assert await ids_of(store, MemoryFilter("alice", project_id="p1", scope=Scope.PROJECT)) == {p1.id}
    assert await ids_of(store, MemoryFilter("alice", scope=Scope.PROJECT)) == {p1.id, p2.id}
    assert await store.count(MemoryFilter("alice", scope=Scope.PROJECT)) == 2


async def test_category_filter(store: VectorStore) -> None:
    pref = mem(content="pref", category="preference")
    skill = mem(content="skill", category="technical_skill")
    fact = mem(content="fact", category="personal_fact")
    await store.upsert([pref, skill, fact], [unit(0), unit(1), unit(2)])
    flt = MemoryFilter("alice", categories=("preference", "personal_fact"))
    assert await ids_of(store, flt) == {pref.id, fact.id}
    assert {h.memory.id for h in await search(store, unit(1), flt, 10)} == {pref.id, fact.id}
    assert await store.count(flt) == 2
    # An empty tuple is a filter that nothing passes (not "no filter").
    empty = MemoryFilter("alice", categories=())
    assert await store.count(empty) == 0
    assert await search(store, unit(0), empty, 10) == []
    assert await store.scroll(empty, 10) == ([], None)


async def test_agent_filter(store: VectorStore) -> None:
    cli, web, none = mem(content="cli", agent_id="cli"), mem(content="web", agent_id="web"), mem(content="x")
    await store.upsert([cli, web, none], [unit(0), unit(1), unit(2)])
    flt = MemoryFilter("alice", agent_id="cli")
    assert await ids_of(store, flt) == {cli.id}
    assert [h.memory.id for h in await search(store, unit(1), flt, 10)] == [cli.id]
    assert await store.count(flt) == 1
    assert await store.count(MemoryFilter("alice")) == 3


async def test_sensitivity_ceiling(store: VectorStore) -> None:
    tiers = {t: mem(content=t.value).model_copy(update={"sensitivity": t}) for t in Sensitivity}
    await store.upsert(list(tiers.values()), [unit(i) for i in range(len(tiers))])
    ids = {t: m.id for t, m in tiers.items()}
    assert await ids_of(store, MemoryFilter("alice")) == set(ids.values())  # no ceiling: every tier
    for ceiling, seen in ((Sensitivity.PUBLIC, 1), (Sensitivity.INTERNAL, 2), (Sensitivity.PRIVATE, 3),
                          (Sensitivity.SECRET, 4)):
        flt = MemoryFilter("alice", max_sensitivity=ceiling)
        want = {ids[t] for t in list(Sensitivity)[:seen]}
        assert await ids_of(store, flt) == want
        assert {h.memory.id for h in await search(store, unit(3), flt, 10)} == want
        assert await store.count(flt) == seen
        # the ceiling of the request being served is the filter's default, and reads by id keep to it
        with lowered(ceiling):
            assert await ids_of(store, MemoryFilter("alice")) == want
            assert {m.id for m in await store.get(list(ids.values()))} == want
    assert len(await store.get(list(ids.values()))) == 4


# -------------------------------------------------------------------------------------------
# scroll
# -------------------------------------------------------------------------------------------


async def test_scroll_pages_cover_each_match_once(store: VectorStore) -> None:
    mine = [mem(content=f"m{i}") for i in range(23)]
    theirs = [mem("bob", content=f"b{i}") for i in range(5)]
    await store.upsert(mine + theirs, [unit(i % DIM) for i in range(len(mine) + len(theirs))])
    flt = MemoryFilter("alice")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page, cursor = await store.scroll(flt, 5, cursor)
        pages += 1
        assert len(page) <= 5
        seen += [m.id for m in page]
        if cursor is None:
            break
        if pages == 2:  # concurrent inserts must not make the walk skip or repeat old memories
            await store.upsert([mem(content=f"late{i}") for i in range(4)], [unit(1)] * 4)
        assert pages < 20
    assert len(seen) == len(set(seen))
    assert {m.id for m in mine} <= set(seen)
    assert seen == sorted(seen, key=uuid.UUID)  # ordered by id
    assert not set(seen) & {t.id for t in theirs}
    assert set(seen) <= {m.id for m in (await store.scroll(flt, 100))[0]}


async def test_scroll_last_page_and_bad_cursor(store: VectorStore) -> None:
    ms = [mem(content=f"m{i}") for i in range(4)]
    await store.upsert(ms, [unit(0)] * 4)
    page, cursor = await store.scroll(MemoryFilter("alice"), 4)
    assert len(page) == 4 and cursor is None
    page, cursor = await store.scroll(MemoryFilter("alice"), 3)
    assert len(page) == 3 and cursor is not None
    rest, end = await store.scroll(MemoryFilter("alice"), 3, cursor)
    assert len(rest) == 1 and end is None
    with pytest.raises(DomainError):
        await store.scroll(MemoryFilter("alice"), 3, "garbage")


def created(m: Memory, at: str) -> Memory:
    return m.model_copy(update={"created_at": at})


def listing_key(order: ListOrder) -> Any:
    """The listing's total order: created_at (the instant) newest or oldest first, then id."""
    def key(m: Memory) -> tuple[float, uuid.UUID]:
        when = utc(datetime.fromisoformat(m.created_at)).timestamp()
        return (-when if order is ListOrder.NEWEST else when), uuid.UUID(m.id)
    return key


async def walk(store: VectorStore, flt: MemoryFilter, size: int, order: ListOrder,
               between: Any = None) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    for pages in range(1, 200):
        page, cursor = await store.scroll(flt, size, cursor, order)
        assert len(page) <= size and (page or cursor is None)  # no empty page before the end
        seen += [m.id for m in page]
        if cursor is None:
            return seen
        if between is not None:
            await between(pages)
    raise AssertionError("the walk does not end")


@pytest.mark.parametrize("order", [ListOrder.NEWEST, ListOrder.OLDEST])
async def test_scroll_by_created_at_pages_through_ties_without_skips_or_repeats(
        store: VectorStore, order: ListOrder) -> None:
    """Groups of equal created_at larger than a page, single ones, one instant written with another UTC offset,
    another user's memories at the same instants: every page size walks each memory once, in (created_at, id)."""
    stamps = (["2025-03-01T10:00:00+00:00"] * 7 + ["2025-03-01T10:00:00.000001+00:00"]
              + ["2025-03-02T08:30:00+00:00"] * 12 + ["2025-03-02T10:30:00.5+02:00", "2025-03-02T08:30:00.5Z"]
              + [f"2025-03-0{d}T00:00:00+00:00" for d in range(3, 8)] + ["2024-12-31T23:59:59.999999+00:00"] * 3)
    mine = [created(mem(content=f"m{i}"), at) for i, at in enumerate(stamps)]
    theirs = [created(mem("bob", content=f"b{i}"), at) for i, at in enumerate(stamps[:10])]
    await store.upsert(mine + theirs, [unit(i % DIM) for i in range(len(mine) + len(theirs))])
    expected = [m.id for m in sorted(mine, key=listing_key(order))]
    for size in (1, 2, 3, 5, 7, 8, 13, 30, 31, 100):
        assert await walk(store, MemoryFilter("alice"), size, order) == expected, size


async def test_scroll_newest_first_during_writes_and_with_cursors_of_its_own_order(store: VectorStore) -> None:
    """A walk newest first returns every memory that existed when it began exactly once while writes go on (a
    newer memory, one more in the tie group being listed); a cursor of another order is refused."""
    tied = [created(mem(content=f"t{i}"), "2025-05-05T05:05:05+00:00") for i in range(9)]
    older = [created(mem(content=f"o{i}"), f"2025-04-0{i + 1}T00:00:00+00:00") for i in range(6)]
    await store.upsert(tied + older, [unit(0)] * 15)
    expected = [m.id for m in sorted(tied + older, key=listing_key(ListOrder.NEWEST))]

    async def write(pages: int) -> None:
        if pages == 2:
            late = [created(mem(content="newer"), "2026-01-01T00:00:00+00:00"),
                    created(mem(content="tie"), "2025-05-05T05:05:05+00:00")]
            await store.upsert(late, [unit(1)] * 2)

    seen = await walk(store, MemoryFilter("alice"), 4, ListOrder.NEWEST, write)
    assert len(seen) == len(set(seen))
    assert [i for i in seen if i in set(expected)] == expected
    _, newest = await store.scroll(MemoryFilter("alice"), 3, None, ListOrder.NEWEST)
    assert newest is not None and newest.startswith("n")
    _, by_id = await store.scroll(MemoryFilter("alice"), 3)
    assert by_id is not None
    for cursor, order in ((newest, ListOrder.OLDEST), (newest, ListOrder.ID), (by_id, ListOrder.NEWEST),
                          ("n12x", ListOrder.NEWEST), ("n1.not-an-id", ListOrder.NEWEST)):
        with pytest.raises(DomainError):
            await store.scroll(MemoryFilter("alice"), 3, cursor, order)
    assert await store.scroll(MemoryFilter("carol"), 3, None, ListOrder.NEWEST) == ([], None)
    assert await store.scroll(MemoryFilter("alice", categories=()), 3, None, ListOrder.OLDEST) == ([], None)


async def test_edge_shard_made_before_the_created_at_index_gains_it_and_lists_newest_first(tmp_path: Path) -> None:
    import qdrant_edge as qe

    store = EdgeVectorStore(tmp_path / "edge", COLLECTION)
    await store.ensure_collection(DIM, EMBEDDER)
    ms = [created(mem(content=f"m{i}"), f"2025-06-{10 + i:02d}T00:00:00+00:00") for i in range(5)]
    await store.upsert(ms, [unit(0)] * 5)
    await store.close()
    shard = qe.EdgeShard.load(str(tmp_path / "edge" / COLLECTION))  # as a shard of an earlier version left it
    shard.update(qe.UpdateOperation.delete_field_index("created_at"))
    assert "created_at" not in shard.info().payload_schema
    shard.flush()
    shard.close()
    again = EdgeVectorStore(tmp_path / "edge", COLLECTION)
    await again.ensure_collection(DIM, EMBEDDER)
    try:
        page, cursor = await again.scroll(MemoryFilter("alice"), 10, None, ListOrder.NEWEST)
        assert [m.id for m in page] == [m.id for m in reversed(ms)] and cursor is None
    finally:
        await again.close()


# -------------------------------------------------------------------------------------------
# dedup reads: vectors with payload, boundaries
# -------------------------------------------------------------------------------------------


async def test_scroll_vectors_pages_with_unit_vectors(store: VectorStore) -> None:
    mine = [mem(content=f"m{i}") for i in range(11)]
    other_scope = mem(content="p", category="convention", scope=Scope.PROJECT, project_id="p1")
    theirs = mem("bob", content="b")
    vectors = [unit(i % DIM, (i + 1) % DIM, 0.5) for i in range(len(mine))]
    await store.upsert([*mine, other_scope, theirs], [*vectors, unit(0), unit(0)])
    flt = MemoryFilter("alice", scope=Scope.GLOBAL)
    seen: dict[str, list[float]] = {}
    cursor: str | None = None
    for _ in range(20):
        page, cursor = await store.scroll_vectors(flt, 4, cursor)
        assert len(page) <= 4
        for rec in page:
            assert rec.memory.id not in seen
            seen[rec.memory.id] = rec.vector
        if cursor is None:
            break
    assert set(seen) == {m.id for m in mine}
    for m, v in zip(mine, vectors, strict=True):
        norm = math.sqrt(sum(x * x for x in v))
        assert seen[m.id] == pytest.approx([x / norm for x in v], abs=1e-5)  # cosine: stored unit length
    got = (await store.scroll_vectors(flt, 100))[0]
    assert {r.memory.id: r.memory for r in got} == {m.id: m for m in mine}
    assert await store.scroll_vectors(MemoryFilter("carol", scope=Scope.GLOBAL), 10) == ([], None)
    with pytest.raises(DomainError):
        await store.scroll_vectors(flt, 3, "garbage")


async def test_boundaries_list_users_scopes_and_projects(store: VectorStore) -> None:
    memories = [
        mem("alice", "g1"), mem("alice", "g2"),
        mem("alice", "p1", category="convention", scope=Scope.PROJECT, project_id="p1"),
        mem("alice", "p2a", category="convention", scope=Scope.PROJECT, project_id="p2"),
        mem("alice", "p2b", category="convention", scope=Scope.PROJECT, project_id="p2"),
        mem("bob", "only project", category="convention", scope=Scope.PROJECT, project_id="p1"),
    ]
    await store.upsert(memories, [unit(i % DIM) for i in range(len(memories))])
    alice = [
        Boundary("alice", Scope.GLOBAL, None, 2),
        Boundary("alice", Scope.PROJECT, "p1", 1),
        Boundary("alice", Scope.PROJECT, "p2", 2),
    ]
    bob = [Boundary("bob", Scope.PROJECT, "p1", 1)]
    assert await store.boundaries() == alice + bob
    assert await store.boundaries("bob") == bob
    assert await store.boundaries("nobody") == []
    # a boundary's filter selects exactly its memories
    for b in alice + bob:
        assert await store.count(b.filter()) == b.count


# -------------------------------------------------------------------------------------------
# durability
# -------------------------------------------------------------------------------------------


async def test_persists_across_close_and_reopen(backend: Backend) -> None:
    store = await backend.ready()
    keep, gone = mem(content="keep", metadata={"k": [1, 2]}), mem(content="gone")
    await store.upsert([keep, gone], [unit(3), unit(4)])
    await store.delete([gone.id])
    await store.close()
    again = await backend.ready()
    assert await again.count() == 1
    assert await again.get([keep.id, gone.id]) == [keep]
    hits = await search(again, unit(3), MemoryFilter("alice"), 5)
    assert hits[0].memory == keep and math.isclose(hits[0].score, 1.0, abs_tol=1e-5)


CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.unit.test_vector_store_contract import Backend, DIM, mem, unit

async def main() -> None:
    store = await Backend({kind!r}, Path({root!r})).ready()
    await store.upsert([mem(content="survivor", mid={mid!r})], [unit(5)])
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


@pytest.mark.parametrize("kind", ["edge", "qdrant_local"])  # the writing process owns the store (a killed worker
async def test_upsert_survives_sigkill(kind: str, tmp_path: Path) -> None:  # child: test_worker_process.py)
    backend = Backend(kind, tmp_path)
    mid = str(uuid.uuid4())
    code = textwrap.dedent(CHILD).format(repo=str(REPO), kind=backend.kind, root=str(backend.root), mid=mid)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    store = await backend.ready()
    try:
        assert [m.content for m in await store.get([mid])] == ["survivor"]
    finally:
        await store.close()


# -------------------------------------------------------------------------------------------
# adapter-specific failure modes
# -------------------------------------------------------------------------------------------


async def test_edge_shard_is_exclusive(tmp_path: Path) -> None:
    first = EdgeVectorStore(tmp_path, COLLECTION)
    second = EdgeVectorStore(tmp_path, COLLECTION)
    try:
        await first.ensure_collection(DIM, EMBEDDER)
        with pytest.raises(DependencyUnavailable, match="already open"):
            await second.ensure_collection(DIM, EMBEDDER)
    finally:
        await first.close()
        await second.close()


async def test_unreachable_server_is_dependency_unavailable() -> None:
    store = QdrantServerVectorStore("http://127.0.0.1:1", COLLECTION)
    try:
        with pytest.raises(DependencyUnavailable):
            await store.ensure_collection(DIM, EMBEDDER)
        with pytest.raises(DependencyUnavailable):
            await store.ping()
        with pytest.raises(DependencyUnavailable):
            await store.count()
    finally:
        await store.close()


# -------------------------------------------------------------------------------------------
# lexical retriever and the occurred_at window
# -------------------------------------------------------------------------------------------


async def test_search_text_finds_a_rare_token_the_vectors_miss(store: VectorStore) -> None:
    plain = [mem(content=f"we talked about the weather on day {i}") for i in range(6)]
    rare = mem(content="the incident ticket is ZX-4411, assigned to Ingvild")
    await store.upsert([*plain, rare], [unit(0)] * 6 + [unit(5)])
    # the dense query points at the plain ones; the lexical query names the ticket
    dense = await search(store, unit(0), MemoryFilter("alice"), 3)
    assert rare.id not in {h.memory.id for h in dense}
    lexical = await search_text(store, "what about ZX-4411?", MemoryFilter("alice"), 3)
    assert [h.memory.id for h in lexical][:1] == [rare.id]
    assert lexical[0].score > 0
    by_name = await search_text(store, "Ingvild", MemoryFilter("alice"), 3)
    assert [h.memory.id for h in by_name] == [rare.id]
    # stop words only: nothing to match
    assert await search_text(store, "the is to", MemoryFilter("alice"), 3) == []


async def test_update_payload_changes_fields_and_keeps_both_vectors(store: VectorStore) -> None:
    """Superseding rewrites a payload field in place: the dense and lexical vectors stay as they were (nothing is
    embedded again), and an id the store does not hold is not created."""
    old = mem(content="the incident ticket is ZX-4411")
    await store.upsert([old], [unit(2, 3, 0.5)])
    before = await store.rank([RankRequest(MemoryFilter("alice", active_only=False), 3, vector=unit(2)),
                               RankRequest(MemoryFilter("alice", active_only=False), 3, text="ZX-4411")])
    marked = old.model_copy(update={"superseded_by": str(uuid.uuid4()), "superseded_at": "2026-02-01T00:00:00+00:00"})
    ghost = mem(content="never stored")
    await store.update_payload([marked, ghost])
    [got] = await store.get([old.id])
    assert got.superseded_by == marked.superseded_by and got.content == old.content
    assert await store.get([ghost.id]) == []
    after = await store.rank([RankRequest(MemoryFilter("alice", active_only=False), 3, vector=unit(2)),
                              RankRequest(MemoryFilter("alice", active_only=False), 3, text="ZX-4411")])
    assert after == before  # same vectors: the same ids and scores, dense and lexical
    assert await store.rank([RankRequest(MemoryFilter("alice", active_only=True), 3, vector=unit(2))]) == [[]]


async def test_search_text_matches_a_windows_user_lines_not_the_assistants(store: VectorStore) -> None:
    """An interaction window is indexed by what the user said: the assistant's chatter matches nothing."""
    nurse = mem(content="user: charge nurse on my unit is Keisha\nassistant: Sounds like a great person to work with.")
    raw = mem(content="a person I work with")  # a memory that is not a window: all its words
    await store.upsert([nurse, raw], [unit(0), unit(1)])
    assert [h.memory.id for h in await search_text(store, "where do I work?", MemoryFilter("alice"), 5)] == [raw.id]
    assert [h.memory.id for h in await search_text(store, "Keisha nurse", MemoryFilter("alice"), 5)] == [nurse.id]


async def test_search_text_keeps_tenants_and_filters(store: VectorStore) -> None:
    mine = mem(content="Kafka cluster Zeta")
    theirs = mem(user="bob", content="Kafka cluster Zeta")
    project = mem(content="Kafka in the billing project", category="tech_stack", scope=Scope.PROJECT,
                  project_id="billing")
    await store.upsert([mine, theirs, project], [unit(0), unit(0), unit(1)])
    assert [h.memory.id for h in await search_text(store, "Kafka", MemoryFilter("alice"), 10)] == [mine.id]
    both = await search_text(store, "Kafka", MemoryFilter("alice", project_id="billing"), 10)
    assert {h.memory.id for h in both} == {mine.id, project.id}
    assert await search_text(store, "Kafka", MemoryFilter("carol"), 10) == []


async def test_rank_batches_dense_and_lexical_with_the_same_order_as_search(store: VectorStore) -> None:
    """`rank` answers each request as `search` / `search_text` would, ids and scores only, in request order;
    a request that cannot match (no category, only stop words) answers []."""
    ms = [mem(content=f"Kafka note {i} about the billing queue") for i in range(5)]
    ms.append(mem(content="the incident ticket is ZX-4411"))
    await store.upsert(ms, [unit(i % 4, (i + 1) % 4, 0.3 * i) for i in range(6)])
    flt = MemoryFilter("alice")
    answers = await store.rank([
        RankRequest(flt, 4, vector=unit(1)), RankRequest(flt, 10, text="ZX-4411 Kafka"),
        RankRequest(MemoryFilter("alice", categories=()), 4, vector=unit(1)), RankRequest(flt, 3, text="the is to"),
        RankRequest(MemoryFilter("bob"), 4, vector=unit(1)),
    ])
    assert len(answers) == 5
    dense, lexical, no_category, stop_words, other_user = answers
    for got, hits in ((dense, await search(store, unit(1), flt, 4)),
                      (lexical, await search_text(store, "ZX-4411 Kafka", flt, 10))):
        assert [mid for mid, _ in got] == [h.memory.id for h in hits]
        assert [score for _, score in got] == pytest.approx([h.score for h in hits])
    assert lexical[0][0] == ms[5].id and len(lexical) == 6
    assert no_category == [] and stop_words == [] and other_user == []
    assert await store.rank([]) == []


async def test_rank_among_ids_ranks_only_those_the_store_holds_and_the_filter_admits(store: VectorStore) -> None:
    """The graph retriever's candidates ranked by the query: nearest first among `ids` only; an id of another user,
    of a memory never stored or not a UUID is left out; an empty `ids` matches nothing."""
    best, good, other = mem(content="best"), mem(content="good"), mem(content="not a candidate")
    theirs = mem(user="bob", content="theirs")
    await store.upsert([best, good, other, theirs], [unit(0), unit(0, 1, 0.5), unit(0, 1, 0.1), unit(0)])
    flt = MemoryFilter("alice")
    ids = (good.id, theirs.id, best.id, str(uuid.uuid4()), "not-a-uuid")
    among, whole, nothing = await store.rank([
        RankRequest(flt, 10, vector=unit(0), ids=ids), RankRequest(flt, 10, vector=unit(0)),
        RankRequest(flt, 10, vector=unit(0), ids=()),
    ])
    assert [mid for mid, _ in among] == [best.id, good.id]
    assert [mid for mid, _ in whole] == [best.id, other.id, good.id]  # `other` is nearer than `good`: left out above
    assert among[0][1] == pytest.approx(1.0, abs=1e-5) and nothing == []
    [limited] = await store.rank([RankRequest(flt, 1, vector=unit(0), ids=ids)])
    assert [mid for mid, _ in limited] == [best.id]


async def _held(store: VectorStore, ids: list[str], flt: MemoryFilter) -> set[str]:
    """The ids among `ids` of memories the store holds and `flt` admits, as the graph retriever's ranking among
    its candidates sees them."""
    [hits] = await store.rank([RankRequest(flt, max(1, len(ids)), vector=unit(0), ids=tuple(ids))])
    return {mid for mid, _ in hits}


async def test_rank_among_ids_keeps_the_ids_the_filter_admits(store: VectorStore) -> None:
    mine = mem(content="a")
    project = mem(content="b", category="tech_stack", scope=Scope.PROJECT, project_id="billing")
    theirs = mem(user="bob", content="c")
    await store.upsert([mine, project, theirs], [unit(0)] * 3)
    gone = mem(content="never stored")
    ids = [mine.id, project.id, theirs.id, gone.id, "not-a-uuid"]
    assert await _held(store, ids, MemoryFilter("alice")) == {mine.id}
    assert await _held(store, ids, MemoryFilter("alice", project_id="billing")) == {mine.id, project.id}
    assert await _held(store, ids, MemoryFilter("alice", categories=("tech_stack",), project_id="billing")) == {
        project.id}
    assert await _held(store, [], MemoryFilter("alice")) == set()
    dated = mem(content="d").model_copy(update={"occurred_at": "2023-05-10T09:00:00+00:00"})
    await store.upsert([dated], [unit(0)])
    window = MemoryFilter("alice", after="2023-05-01T00:00:00+00:00", before="2023-06-01T00:00:00+00:00")
    assert await _held(store, [*ids, dated.id], window) == {dated.id}


async def test_occurred_at_window_filters_every_read(store: VectorStore) -> None:
    times = ["2023-01-10T09:00:00+00:00", "2023-05-10T09:00:00+00:00", "2024-02-01T09:00:00+00:00"]
    ms = [mem(content=f"went hiking {i}").model_copy(update={"occurred_at": t}) for i, t in enumerate(times)]
    await store.upsert(ms, [unit(0)] * 3)
    window = MemoryFilter("alice", after="2023-03-01T00:00:00+00:00", before="2024-01-01T00:00:00+00:00")
    assert [h.memory.id for h in await search(store, unit(0), window, 10)] == [ms[1].id]
    assert [h.memory.id for h in await search_text(store, "hiking", window, 10)] == [ms[1].id]
    assert await ids_of(store, window) == {ms[1].id}
    assert await ids_of(store, MemoryFilter("alice", before=times[1])) == {ms[0].id}  # before is exclusive
    assert await ids_of(store, MemoryFilter("alice", after=times[1])) == {ms[1].id, ms[2].id}
    for m in ms:  # the Python form of the rule agrees with the store's
        assert window.matches(m) == (m.id == ms[1].id)


async def test_layout_1_edge_shard_is_migrated_once_keeping_every_point(tmp_path: Path) -> None:
    """A shard written before the lexical retriever (one dense vector, no occurred_at) is copied into the
    new layout at start: same points and payloads, BM25 vectors added, occurred_at = created_at."""
    import json

    import qdrant_edge as qe

    shard_dir = tmp_path / "edge" / COLLECTION
    old = qe.EdgeShard.create(str(shard_dir), qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM,
                                                                                        distance=qe.Distance.Cosine)))
    ms = [mem(content=f"note {i} about Postgres replication") for i in range(1200)]  # more than one page
    payloads = [{k: v for k, v in m.model_dump(mode="json", exclude={"id"}).items()
                 if k not in ("occurred_at", "source_message_ids")} for m in ms]
    old.update(qe.UpdateOperation.upsert_points([qe.Point(m.id, unit(i % DIM), p)
                                                 for i, (m, p) in enumerate(zip(ms, payloads, strict=True))]))
    old.flush()
    old.close()
    (shard_dir / "memory_store.json").write_text(json.dumps({"embedder": EMBEDDER, "dim": DIM}))

    store = EdgeVectorStore(tmp_path / "edge", COLLECTION)
    await store.ensure_collection(DIM, EMBEDDER)
    try:
        assert await store.count() == len(ms)
        [got] = await store.get([ms[7].id])
        assert got.content == ms[7].content and got.occurred_at == ms[7].created_at
        hits = await search_text(store, "Postgres replication", MemoryFilter("alice"), 5)
        assert len(hits) == 5
        [nearest] = await search(store, unit(3), MemoryFilter("alice"), 1)
        assert nearest.memory.id in {m.id for i, m in enumerate(ms) if i % DIM == 3}
    finally:
        await store.close()
    assert (tmp_path / "edge" / f"{COLLECTION}.layout1").is_dir()  # the old shard is kept beside it
    assert json.loads((shard_dir / "memory_store.json").read_text())["layout"] == 2
    again = EdgeVectorStore(tmp_path / "edge", COLLECTION)  # a second start does not migrate again
    await again.ensure_collection(DIM, EMBEDDER)
    assert await again.count() == len(ms)
    await again.close()


async def test_active_only_leaves_out_superseded_memories(store: VectorStore) -> None:
    old, new = mem(content="dinner at 50 dollars"), mem(content="dinner at 80 dollars")
    old = old.model_copy(update={"superseded_by": new.id, "superseded_at": "2026-01-01T00:00:00+00:00"})
    await store.upsert([old, new], [unit(0), unit(0)])
    active = MemoryFilter("alice", active_only=True)
    assert await ids_of(store, active) == {new.id}
    assert [h.memory.id for h in await search(store, unit(0), active, 10)] == [new.id]
    assert [h.memory.id for h in await search_text(store, "dinner", active, 10)] == [new.id]
    assert await store.count(active) == 1
    assert await ids_of(store, MemoryFilter("alice")) == {old.id, new.id}  # history: everything
    [back] = await store.get([old.id])
    assert back.superseded_by == new.id  # the payload round-trips
    for m in (old, new):  # the Python form of the rule agrees with the store's
        assert active.matches(m) == (m.id == new.id)
