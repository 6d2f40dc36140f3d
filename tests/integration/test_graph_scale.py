"""Graph writes whose cost does not grow with the user's graph, against a real Neo4j.

- On an entity that already has 5,000 relations and 5,000 mentions, the plans of the relation upsert, the
  supersession of single-valued facts and the mention upsert find what they touch through indexes (read from
  EXPLAIN, not from timing), and PROFILE counts a handful of store accesses, not thousands; the write keeps one
  relation per (source, predicate, target) and supersession intact.
- Relations written before relation keys (no `key`, no `slot`) are migrated at start and written to afterwards
  without duplicates; a legacy duplicate does not stop the migration.
- An import larger than one chunk completes on a Neo4j behind a slow link (a throttling proxy): the chunk that
  cannot finish in time is split and retried, not failed.
- A bulk upsert for a fresh user starts with a small transaction and grows from measured time, also after the
  store's earlier bulk writes grew large (sizes read from the store's record of its chunks, not timed).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scripts.bench import graph_probe as probe
from scripts.bench.procs import SlowProxy
from service.core.domain import Memory, Scope, content_hash
from service.identity.rules import NameRules
from service.memory.export_format import FORMAT, VERSION
from service.stores.graph import EntityRef, MemoryLinks, RelationRef
from service.stores.neo4j import curation, cypher_writes
from service.stores.neo4j.executor import FIRST_CHUNK
from service.stores.neo4j.memories import supersede_rows
from service.stores.neo4j.rows import MAX_ALIASES, MAX_ROLES, entity_id, link_rows, memory_row, relation_id
from service.stores.neo4j.store import Neo4jGraphStore
from tests.conftest import unique
from tests.integration.conftest import running_app, wait_task

DEGREE = 5000
T0 = "2024-01-01T00:00:00+00:00"


@pytest.fixture(scope="module")
async def store() -> AsyncIterator[Neo4jGraphStore]:
    # a 20 s timeout: the checks below read thousands of rows on a machine that may be busy
    s = Neo4jGraphStore(os.environ["TEST_NEO4J_URI"], "neo4j", None, os.environ.get("TEST_NEO4J_DATABASE", "memory"),
                        20, NameRules())
    await s.ensure_schema()
    yield s
    await s.close()


def memory(user_id: str, i: int, at: str) -> Memory:
    content = f"memory {i} of a dense entity"
    return Memory(id=str(uuid.uuid4()), user_id=user_id, content=content, category="personal_fact",
                  scope=Scope.GLOBAL, project_id=None, hash=content_hash(content), created_at=at, updated_at=at)


def at(i: int) -> str:
    return f"2024-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"


def operators(plan: Any) -> list[tuple[str, str]]:
    """(operator, details) of every operator of a plan, depth first."""
    args = plan.get("args", {})
    here = (str(plan["operatorType"]).split("@")[0], " ".join(str(args.get("Details", "")).split()))
    return [here] + [op for child in plan.get("children", []) for op in operators(child)]


def db_hits(plan: Any) -> int:
    return int(plan.get("dbHits", 0)) + sum(db_hits(c) for c in plan.get("children", []))


async def erase_user(store: Neo4jGraphStore, user_id: str) -> None:
    """Test hygiene: the user's nodes go (the suite shares one Neo4j; other tests scan it)."""
    for label in ("Memory", "Entity"):
        for _ in range(1000):  # bounded: batches of 2,000
            records, _, _ = await store.executor.driver.execute_query(
                f"MATCH (n:{label} {{user_id: $u}}) WITH n LIMIT 2000 DETACH DELETE n RETURN count(*) AS c",
                u=user_id, database_=store.executor.database)
            if records[0]["c"] == 0:
                break


@pytest.fixture(scope="module")
async def dense(store: Neo4jGraphStore) -> AsyncIterator[tuple[str, list[Memory]]]:
    """A user whose entity "user" has DEGREE relations (every fourth a single-valued `deploys_to`, so each of
    those superseded the one before) and DEGREE mentions, written through the store."""
    u = f"dense-{uuid.uuid4().hex[:10]}"
    memories = [memory(u, i, at(i)) for i in range(DEGREE)]
    links = [MemoryLinks(memory_id=m.id, entities=[EntityRef("user", "person")],
                         relations=[RelationRef("user", "deploys_to" if i % 4 == 0 else "uses", f"tool {i}",
                                                f"fact {i}")]) for i, m in enumerate(memories)]
    for start in range(0, DEGREE, 1000):
        await store.memories.upsert_memories(memories[start : start + 1000], links[start : start + 1000])
    yield u, memories
    await erase_user(store, u)


async def plans(store: Neo4jGraphStore, mode: str, steps: list[tuple[str, str, dict[str, Any]]]
                ) -> dict[str, Any]:
    """EXPLAIN or PROFILE of each statement, in one transaction that is rolled back."""
    out: dict[str, Any] = {}
    async with store.executor.session() as session:
        tx = await session.begin_transaction()
        try:
            for name, stmt, params in steps:
                summary = await (await tx.run(f"{mode} {stmt}", **params)).consume()  # type: ignore[arg-type]
                out[name] = summary.profile if mode == "PROFILE" else summary.plan
        finally:
            await tx.rollback()
    return out


async def test_writes_on_a_dense_entity_use_indexes(store: Neo4jGraphStore, dense: tuple[str, list[Memory]]) -> None:
    u, _ = dense
    m = memory(u, 10**6, "2025-06-01T00:00:00+00:00")
    link = MemoryLinks(memory_id=m.id, entities=[EntityRef("user", "person")], relations=[
        RelationRef("user", "deploys_to", "tool 8", "deploys to tool 8 again"),  # history, stated again later
        RelationRef("user", "uses", "tool 3", "uses tool 3 still"),  # an existing live edge
        RelationRef("user", "uses", "a new tool", "uses a new tool"),  # a new edge
    ])
    graph = link_rows([m], [link], NameRules())
    steps: list[tuple[str, str, dict[str, Any]]] = [
        ("memories", cypher_writes.UPSERT_MEMORIES, {"rows": [memory_row(m)]}),
        ("entities", cypher_writes.UPSERT_ENTITIES, {"rows": graph["entities"], "max_aliases": MAX_ALIASES,
                                                   "max_roles": MAX_ROLES}),
        ("mentions", cypher_writes.UPSERT_MENTIONS, {"rows": graph["mentions"]}),
        ("relations", cypher_writes.UPSERT_RELATIONS, {"rows": graph["relations"]}),
        ("supersede", cypher_writes.SUPERSEDE,
         {"rows": supersede_rows(graph["relations"]), "now": "2026-01-01T00:00:00Z"}),
    ]
    explained = {name: operators(plan) for name, plan in (await plans(store, "EXPLAIN", steps)).items()}
    walks = ("Expand(All)", "OptionalExpand(All)", "VarLengthExpand(All)")
    scans = ("AllNodesScan", "NodeByLabelScan", "DirectedRelationshipTypeScan", "UndirectedRelationshipTypeScan",
             "DirectedRelationshipIndexScan", "UndirectedRelationshipIndexScan", "DirectedAllRelationshipsScan")
    for name, ops in explained.items():
        kinds = [op for op, _ in ops]
        assert not [k for k in kinds if k in walks or k in scans], (name, kinds)
    # the relation: a seek of the unique key, then the two endpoints compared (no walk of either node)
    relation_ops = explained["relations"]
    assert any(op == "DirectedRelationshipUniqueIndexSeek(Locking)" and "RELATES(key)" in d for op, d in relation_ops)
    assert not any(op.startswith(("Expand", "OptionalExpand")) for op, _ in relation_ops)
    # supersession: the new edge by its key, the other live edges of its subject and predicate by slot
    supersede_ops = explained["supersede"]
    assert any("UniqueIndexSeek" in op and "RELATES(key)" in d for op, d in supersede_ops)
    assert sum(op == "DirectedRelationshipIndexSeek" and "RELATES(slot)" in d for op, d in supersede_ops) == 2
    assert not any(op.startswith(("Expand", "OptionalExpand")) for op, _ in supersede_ops)
    # the mention: both nodes by unique index; the MENTIONS check is Expand(Into) between the two bound nodes,
    # which starts from the node with fewer relationships (the new memory), never a walk of the entity
    mention_ops = explained["mentions"]
    assert [op for op, _ in mention_ops if op.startswith("NodeUniqueIndexSeek")] == ["NodeUniqueIndexSeek(Locking)"] * 2
    assert ("Expand(Into)", "(m)-[x:MENTIONS]->(e)") in mention_ops

    # PROFILE counts store accesses: a handful per row, not the entity's 5,000 relations and mentions
    profiled = await plans(store, "PROFILE", steps)
    hits = {name: db_hits(plan) for name, plan in profiled.items()}
    assert max(hits.values()) < 300, hits

    # the write itself: one relation per (source, predicate, target), and supersession intact
    await store.memories.upsert_memories([m], [link])
    await store.memories.upsert_memories([m], [link])  # a replay converges
    [counts] = await probe._rows(store, """
        MATCH (s:Entity)-[r:RELATES {user_id: $u}]->(o:Entity)
        WITH s, r.predicate AS p, o, count(r) AS n
        RETURN count(*) AS triples, sum(n) AS edges, max(n) AS most""", u=u)
    assert counts == {"triples": DEGREE + 1, "edges": DEGREE + 1, "most": 1}  # one per (source, predicate, target)
    deploys = {r["target"]: r for r in await probe._rows(store, """
        MATCH (:Entity)-[r:RELATES {user_id: $u}]->(o:Entity)
        WHERE r.predicate = 'deploys_to' AND (r.invalid_at IS NULL OR o.name IN $names)
        RETURN o.name AS target, r.invalid_at AS invalid_at, r.expired_at AS expired_at, r.memory_ids AS memory_ids""",
        u=u, names=["tool 8", f"tool {(DEGREE - 1) // 4 * 4}"])}
    live = [t for t, r in deploys.items() if r["invalid_at"] is None and r["expired_at"] is None]
    assert live == ["tool 8"], live  # the restated fact is the one valid deploys_to
    last = f"tool {(DEGREE - 1) // 4 * 4}"
    assert deploys[last]["invalid_at"] == "2025-06-01T00:00:00+00:00"  # the newest before it ended then
    assert m.id in deploys["tool 8"]["memory_ids"]
    [uses3] = await probe._rows(store, "MATCH ()-[r:RELATES {key: $key}]->() RETURN r.memory_ids AS memory_ids",
                                key=relation_id(u, "global", "user", "uses", "tool 3"))
    assert m.id in uses3["memory_ids"] and len(uses3["memory_ids"]) == 2
    mentions = await probe._rows(store, "MATCH (:Memory)-[x:MENTIONS]->(e:Entity {id: $id}) RETURN count(x) AS n",
                                 id=entity_id(u, "global", "user"))
    assert mentions[0]["n"] == DEGREE + 1


async def test_relations_written_before_keys_are_migrated(store: Neo4jGraphStore) -> None:
    """Edges as the store wrote them before keys and slots (MERGE on `id`, no `key`, no `slot`), including a
    duplicate that a race of two writers could have left: after a start, a new single-valued fact supersedes
    the legacy live one, and stating a legacy fact again does not make a second edge."""
    u = f"legacy-{uuid.uuid4().hex[:10]}"
    old = [memory(u, i, T0) for i in range(2)]
    ids = {name: entity_id(u, "global", name) for name in ("user", "Oslo", "Acme")}
    lives = relation_id(u, "global", "user", "lives_in", "Oslo")
    works = relation_id(u, "global", "user", "works_at", "Acme")
    await store.executor.driver.execute_query(
        """
        UNWIND $memories AS m CREATE (:Memory {id: m.id, user_id: $u, content: m.content, updated_at: $t0,
                                               created_at: $t0, edge_ids: m.edge_ids, group_id: 'global'})
        WITH count(*) AS done
        UNWIND keys($ids) AS name
        CREATE (:Entity {id: $ids[name], user_id: $u, group_id: 'global', name: name, name_lc: toLower(name),
                         type: 'thing', aliases: [], keys: [toLower(name)]})
        WITH count(*) AS done
        MATCH (s:Entity {id: $ids['user']}), (oslo:Entity {id: $ids['Oslo']}), (acme:Entity {id: $ids['Acme']})
        CREATE (s)-[:RELATES {id: $lives, user_id: $u, group_id: 'global', predicate: 'lives_in', fact: 'lives in Oslo',
                              valid_at: $t0, memory_ids: [$m0], former_memory_ids: [], created_at: $t0}]->(oslo)
        CREATE (s)-[:RELATES {id: $works, user_id: $u, group_id: 'global', predicate: 'works_at', fact: 'works at Acme',
                              valid_at: $t0, memory_ids: [$m1], former_memory_ids: [], created_at: $t0}]->(acme)
        CREATE (s)-[:RELATES {id: $works, user_id: $u, group_id: 'global', predicate: 'works_at', fact: 'works at Acme',
                              valid_at: $t0, memory_ids: [$m1], former_memory_ids: [], created_at: $t0}]->(acme)
        """,
        memories=[{"id": old[0].id, "content": old[0].content, "edge_ids": [lives]},
                  {"id": old[1].id, "content": old[1].content, "edge_ids": [works]}],
        ids=ids, u=u, t0=T0, lives=lives, works=works, m0=old[0].id, m1=old[1].id, database_=store.executor.database)
    await store.ensure_schema()  # a start: the migration
    keyed = await probe._rows(store, "MATCH ()-[r:RELATES {user_id: $u}]->() RETURN r.id AS id, r.key AS key, "
                                     "r.slot AS slot", u=u)
    assert len(keyed) == 3 and all(r["key"] and r["slot"] for r in keyed)
    assert sorted(r["key"] == r["id"] for r in keyed) == [False, True, True]  # the duplicate's key is its own

    later = memory(u, 2, "2025-01-01T00:00:00+00:00")
    await store.memories.upsert_memories([later], [MemoryLinks(memory_id=later.id, entities=[], relations=[
        RelationRef("user", "lives_in", "Bergen", "moved to Bergen"),  # supersedes the legacy Oslo fact
        RelationRef("user", "works_at", "Acme", "still at Acme"),  # the legacy fact stated again
    ])])
    rels = await probe.relations(store, u)
    oslo = next(r for r in rels if r["target"] == "Oslo")
    assert oslo["invalid_at"] == "2025-01-01T00:00:00+00:00" and oslo["expired_at"] is not None
    bergen = next(r for r in rels if r["target"] == "Bergen")
    assert bergen["invalid_at"] is None
    acme = [r for r in rels if r["target"] == "Acme"]
    assert len(acme) == 2  # the legacy duplicate stays as it was; no third edge
    assert sum(later.id in r["memory_ids"] for r in acme) == 1
    await erase_user(store, u)


async def test_import_larger_than_a_chunk_completes_on_a_slow_link(tmp_path: Path, store: Neo4jGraphStore) -> None:
    """600 memories, 600 entities and 600 facts through POST /v1/import, with every byte to Neo4j throttled:
    the first chunk (500 entity rows, over 100 KB) cannot reach Neo4j within the write deadline (6 s), so it is
    split; the import completes with everything in the graph. The link is fast again once a chunk was split (the
    rest of the import would only crawl: over a minute at that rate)."""
    upstream = int(os.environ["TEST_NEO4J_URI"].rsplit(":", 1)[1])
    async with SlowProxy(upstream) as proxy, running_app(
        tmp_path, neo4j_uri=f"bolt://127.0.0.1:{proxy.port}", graph_timeout_seconds=1.0, arq_job_timeout=900,
    ) as (client, deps):
        user = unique("slowimport")
        n = 600
        lines: list[dict[str, Any]] = [{"type": "header", "format": FORMAT, "version": VERSION, "user_id": user,
                                        "embedder": deps.embedder.name, "dim": deps.embedder.dim,
                                        "include_vectors": False}]
        lines.append({"type": "entity", "entity": {"id": entity_id(user, "global", "user"), "name": "user",
                                                   "type": "person", "group_id": "global", "created_at": T0}})
        memories = [memory(user, i, at(i)) for i in range(n)]
        for i in range(n):
            lines.append({"type": "entity", "entity": {"id": entity_id(user, "global", f"tool {i}"),
                                                       "name": f"tool {i}", "type": "tool", "group_id": "global",
                                                       "created_at": T0}})
        for i, m in enumerate(memories):
            lines.append({"type": "memory", "memory": m.model_dump(mode="json"),
                          "entity_ids": [entity_id(user, "global", "user"), entity_id(user, "global", f"tool {i}")]})
        for i, m in enumerate(memories):
            lines.append({"type": "fact", "fact": {
                "id": relation_id(user, "global", "user", "uses", f"tool {i}"),
                "source_id": entity_id(user, "global", "user"), "target_id": entity_id(user, "global", f"tool {i}"),
                "predicate": "uses", "fact": f"user uses tool {i}", "group_id": "global", "valid_at": at(i),
                "memory_ids": [m.id], "created_at": at(i)}})
        lines.append({"type": "end", "counts": {"entities": n + 1, "memories": n, "facts": n}})
        body = "".join(json.dumps(x) + "\n" for x in lines).encode()

        graph, direct = deps.graph, store
        assert isinstance(graph, Neo4jGraphStore)
        splits = graph.chunk_stats.splits
        proxy.upload_rate = 15_000  # bytes/s: 500 entity rows take over 7 s; the write deadline is 6 s

        async def fast_once_split() -> None:
            for _ in range(6000):  # bounded: 600 s
                if graph.chunk_stats.splits > splits:
                    proxy.upload_rate = None
                    return
                await asyncio.sleep(0.1)

        lift = asyncio.create_task(fast_once_split())
        try:
            resp = await client.post("/v1/import", content=body, headers={"content-type": "application/x-ndjson"})
            assert resp.status_code == 202, resp.text
            done = await wait_task(client, resp.json()["task_id"], timeout=600)
            proxy.upload_rate = None
            assert done["status"] == "completed", done
            assert done["result"]["imported"] == {"entities": n + 1, "memories": n, "facts": n, "reembedded": n,
                                                  "rejected": 0, "runs": 0, "messages": 0}
            assert graph.chunk_stats.splits > splits  # a chunk was too slow: it was split, and its halves written
            # read back directly (not through the slow link, whose store has a 1 s read timeout)
            assert await probe.count_memories(direct, user) == n
            rels = await probe.relations(direct, user)
            assert len(rels) == n and all(len(r["memory_ids"]) == 1 for r in rels)
        finally:
            lift.cancel()
            proxy.upload_rate = None
            await erase_user(direct, user)


async def test_a_fresh_users_bulk_write_starts_small_and_grows(store: Neo4jGraphStore) -> None:
    """Two fresh users' bulk upserts of 250 memories, every memory naming a new entity: each write's first
    transaction is FIRST_CHUNK["upsert"] memories, whatever size the store's earlier writes reached, and the next
    ones are larger (the store's target, a tenth of its 20 s write deadline, is far above what 16 memories take)."""
    first = FIRST_CHUNK["upsert"]
    n = 250
    for _ in range(2):
        u = unique("fresh")
        memories = [memory(u, i, at(i)) for i in range(n)]
        links = [MemoryLinks(memory_id=m.id, entities=[EntityRef("owner", "person"), EntityRef(f"thing {i}", "tool")],
                             relations=[RelationRef("owner", "uses", f"thing {i}", f"owner uses thing {i}")])
                 for i, m in enumerate(memories)]
        store.chunk_stats.recent.clear()
        try:
            await store.memories.upsert_memories(memories, links)
            sizes = [items for kind, items, _ in store.chunk_stats.recent if kind == "upsert"]
            assert sizes[0] == first and sizes[1] >= 2 * first and sum(sizes) == n, sizes
            assert await probe.count_memories(store, u) == n
            assert len(await probe.relations(store, u)) == n
        finally:
            await erase_user(store, u)


def seeks(ops: list[tuple[str, str]], index: str) -> int:
    """How many operators of a plan seek the relationship index `index` (e.g. "MENTIONS(live_of)")."""
    return sum(op in ("DirectedRelationshipIndexSeek", "UndirectedRelationshipIndexSeek") and index in d
               for op, d in ops)


async def test_erase_finds_a_live_mention_of_a_dense_entity_by_index(
        store: Neo4jGraphStore, dense: tuple[str, list[Memory]]) -> None:
    """Every memory mentioning "user" but one in the middle is removed, then one is erased: whether a live memory
    still mentions "user" is one seek of MENTIONS(live_of), not a walk of its mentions past thousands of removed
    ones, from either end (rolled back: the dense user is shared)."""
    u, memories = dense
    keep = memories[DEGREE // 2].id
    rows = await probe._rows(store, "MATCH (m:Memory)-[:MENTIONS]->(:Entity {id: $e}) WHERE m.id <> $keep "
                                    "RETURN m.id AS id", e=entity_id(u, "global", "user"), keep=keep)
    assert len(rows) >= DEGREE - 1
    steps: list[tuple[str, str, dict[str, Any]]] = [
        ("mark", cypher_writes.MARK_REMOVED, {
            "rows": [{"id": r["id"], "duplicate_of": None, "user_id": u} for r in rows],
            "now": "2026-01-01T00:00:00+00:00"}),
        ("erase", cypher_writes.ERASE_REMOVED, {"memory_ids": [memories[0].id]}),
    ]
    explained = {name: operators(plan) for name, plan in (await plans(store, "EXPLAIN", steps)).items()}
    assert seeks(explained["erase"], "MENTIONS(live_of)") == 1, explained["erase"]
    assert not [op for op, _ in explained["erase"] if "Scan" in op], explained["erase"]
    # the removed memory's own mentions lose their mark: a walk from the memory (a few relationships), no index scan
    assert any(op == "Expand(All)" and d.startswith("(m)-[x:MENTIONS]->") for op, d in explained["mark"])
    assert not [op for op, _ in explained["mark"] if "Scan" in op], explained["mark"]

    profiled = await plans(store, "PROFILE", steps)
    assert db_hits(profiled["erase"]) < 300, db_hits(profiled["erase"])


async def test_erase_keeps_an_entity_a_live_memory_mentions(store: Neo4jGraphStore) -> None:
    """An erase removes exactly the entities no live memory mentions, whether the live mention carries `live_of`
    or was written before it existed (the walk then decides)."""
    u = f"erase-{uuid.uuid4().hex[:10]}"
    a, b, c = (memory(u, i, at(i)) for i in range(3))
    ents = {a.id: ["Oslo", "Bergen"], b.id: ["Oslo"], c.id: ["Bergen"]}
    links = [MemoryLinks(memory_id=m.id, entities=[EntityRef(n, "place") for n in ents[m.id]], relations=[])
             for m in (a, b, c)]
    await store.memories.upsert_memories([a, b, c], links)
    marked = await probe._rows(store, "MATCH (m:Memory {user_id: $u})-[x:MENTIONS]->(e) "
                                      "RETURN count(x) AS n, count(x.live_of) AS live", u=u)
    assert marked == [{"n": 4, "live": 4}]
    # b's mention as written before `live_of`
    await store.executor.driver.execute_query("MATCH (:Memory {id: $b})-[x:MENTIONS]->() REMOVE x.live_of", b=b.id,
                                              database_=store.executor.database)
    names = "MATCH (e:Entity {user_id: $u}) RETURN e.name AS name ORDER BY name"

    await store.memories.remove_memories([a.id], "2026-01-01T00:00:00+00:00", user_id=u, erase=True)
    assert [r["name"] for r in await probe._rows(store, names, u=u)] == ["Bergen", "Oslo"]
    gone = await probe._rows(store, "MATCH (:Memory {id: $a})-[x:MENTIONS]->() RETURN count(x.live_of) AS live",
                             a=a.id)
    assert gone == [{"live": 0}]  # a removed memory's mentions keep no entity alive

    await store.memories.remove_memories([b.id, c.id], "2026-01-01T00:00:01+00:00", user_id=u, erase=True)
    assert await probe._rows(store, names, u=u) == []
    await erase_user(store, u)


async def test_merge_and_unmerge_into_a_dense_entity_use_indexes(
        store: Neo4jGraphStore, dense: tuple[str, list[Memory]]) -> None:
    """A small entity merged into "user" (5,000 relations, 5,000 mentions) and unmerged: the merge's "is this edge
    copied already" is a seek of RELATES(id), the unmerge finds the copies by their migrated_from indexes (no walk of
    the target's relationships), and the unmerge removes exactly the copies."""
    u, _ = dense
    m = memory(u, 10**7, "2025-07-01T00:00:00+00:00")
    operator = [EntityRef("the operator", "person")]
    await store.memories.upsert_memories([m], [MemoryLinks(memory_id=m.id, entities=operator,
                                                  relations=[RelationRef("the operator", "uses", "tool 1", "op uses 1"),
                                                             RelationRef("tool 2", "owned_by", "the operator",
                                                                         "2 owned by op")])])
    source, target = entity_id(u, "global", "the operator"), entity_id(u, "global", "user")
    before = await probe._rows(store, "MATCH (t:Entity {id: $t}) RETURN COUNT { (t)--() } AS degree", t=target)
    merge = ("merge", cypher_writes.MERGE_ENTITIES, {"source_id": source, "target_id": target, "user_id": u,
                                                "now": "2026-01-01T00:00:00+00:00"})
    unmerge = ("unmerge", curation.UNMERGE, {"id": source, "user_id": u, "now": "2026-01-02T00:00:00+00:00"})
    explained = {name: operators(plan) for name, plan in (await plans(store, "EXPLAIN", [merge, unmerge])).items()}
    assert seeks(explained["merge"], "RELATES(id)") == 2, explained["merge"]  # outgoing and incoming copies
    assert not any(op.startswith("Expand(Into)") and "RELATES" in d for op, d in explained["merge"])
    for index in ("RELATES(migrated_from)", "MENTIONS(migrated_from)", "SAME_AS(migrated_from)",
                  "TOUCHED(migrated_from)"):
        # at least one seek each (the planner may seek an index twice, e.g. once per side of an OR), never a scan
        assert seeks(explained["unmerge"], index) >= 1, (index, explained["unmerge"])
    assert not [op for op, _ in explained["unmerge"] if "Scan" in op or op == "Expand(All)"], explained["unmerge"]

    await store.curation.merge_entities(u, source, target, "2026-01-01T00:00:00+00:00")
    copies = await probe.merge_copies(store, u, source)
    assert copies == {"RELATES": 2, "MENTIONS": 1}, copies
    profiled = await plans(store, "PROFILE", [unmerge])  # rolled back
    assert db_hits(profiled["unmerge"]) < 300, db_hits(profiled["unmerge"])
    await store.curation.unmerge_entity(u, source, "2026-01-02T00:00:00+00:00")
    assert await probe._rows(store, "MATCH ()-[c {migrated_from: $s}]->() RETURN count(c) AS n", s=source) == [{"n": 0}]
    after = await probe._rows(store, "MATCH (t:Entity {id: $t}) RETURN COUNT { (t)--() } AS degree", t=target)
    assert after == before
