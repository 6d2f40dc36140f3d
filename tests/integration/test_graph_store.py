"""Neo4jGraphStore against a real Neo4j: full-text search, temporal edges, lifecycle, paging."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scripts.bench import graph_probe as probe
from service.core.domain import Memory, Scope, content_hash
from service.identity.rules import NameRules
from service.stores.graph import EntityRef, GraphFact, MemoryLinks, RelationRef
from service.stores.neo4j import resolution
from service.stores.neo4j.ddl import COMMUNITY_SCHEMA, CONVERSATION_SCHEMA, RUN_SCHEMA, SCHEMA
from service.stores.neo4j.lucene import lucene_escape
from service.stores.neo4j.rows import entity_id, iso_utc, relation_id
from service.stores.neo4j.schema import SCHEMA_NAMES, statement_name
from service.stores.neo4j.search import lucene_terms
from service.stores.neo4j.store import Neo4jGraphStore

T0 = "2024-01-01T00:00:00+00:00"
T1 = "2025-01-01T00:00:00+00:00"
T2 = "2026-01-01T00:00:00+00:00"
NOW = "2026-06-01T12:00:00+00:00"


@pytest.fixture(scope="module")
async def store() -> AsyncIterator[Neo4jGraphStore]:
    s = Neo4jGraphStore(os.environ["TEST_NEO4J_URI"], "neo4j", None, os.environ.get("TEST_NEO4J_DATABASE", "memory"), 5,
                        NameRules())
    await s.ensure_schema()
    yield s
    await s.close()


def user() -> str:
    return f"gs-{uuid.uuid4().hex[:12]}"


def mem(user_id: str, content: str, *, project: str | None = None, at: str = T0, mid: str | None = None) -> Memory:
    return Memory(
        id=mid or str(uuid.uuid4()), user_id=user_id, content=content, category="personal_fact",
        scope=Scope.PROJECT if project else Scope.GLOBAL, project_id=project, hash=content_hash(content),
        created_at=at, updated_at=at,
    )


def rel(s: str, p: str, o: str, fact: str | None = None, valid_at: str | None = None) -> RelationRef:
    return RelationRef(s, p, o, fact or f"{s} {p.replace('_', ' ')} {o}", valid_at)


def links(m: Memory, *rels: RelationRef, entities: list[EntityRef] | None = None) -> MemoryLinks:
    return MemoryLinks(memory_id=m.id, entities=entities or [], relations=list(rels))


async def write(store: Neo4jGraphStore, m: Memory, *rels: RelationRef) -> Memory:
    await store.memories.upsert_memories([m], [links(m, *rels)])
    return m


def rid(m: Memory, s: str, p: str, o: str) -> str:
    group = f"project--{m.project_id}" if m.project_id else "global"
    return relation_id(m.user_id, group, s, p, o)


async def edges(store: Neo4jGraphStore, user_id: str) -> dict[str, dict[str, Any]]:
    return {str(r["id"]): r for r in await probe.relations(store, user_id)}


def facts(found: list[GraphFact]) -> list[str]:
    return [f.fact for f in found]


async def test_the_write_plans_warm_up_stores_nothing(store: Neo4jGraphStore) -> None:
    """`ensure_schema` ends with one synthetic write through the whole write path, rolled back, so that a fresh
    server has planned the write statements before the first real write: it reaches every step and leaves nothing."""
    report = await store.memories.warm_write_plans()
    assert report.relations == {"warm-up": 1}
    assert sorted(d.decision for d in report.entities["warm-up"]) == ["created", "created"]
    assert await probe.count_memories(store, "warm-up") == 0
    assert await probe.entities(store, "warm-up") == [] and await probe.relations(store, "warm-up") == []


async def test_start_up_creates_only_what_the_graph_lacks(store: Neo4jGraphStore) -> None:
    """Every schema statement names its index or constraint, so a start reads the names once and runs only the
    statements whose name is missing: a dropped index comes back, and nothing else is run again."""
    statements = SCHEMA + resolution.schema(384) + RUN_SCHEMA + CONVERSATION_SCHEMA + COMMUNITY_SCHEMA
    names = [statement_name(s) for s in statements]
    assert None not in names and len(set(names)) == len(names), names

    async def existing() -> set[str]:
        async with store.executor.session() as session:
            return {r["name"] for show in SCHEMA_NAMES for r in await (await session.run(show)).data()}

    async with store.executor.session() as session:
        await (await session.run("DROP INDEX community_user IF EXISTS")).consume()
    assert "community_user" not in await existing()
    await store.ensure_schema()
    assert "community_user" in await existing()
    assert {n for n in names if n and not n.startswith("entity_name_vec")} <= await existing()


# ---- Lucene escaping ------------------------------------------------------------------------


def test_lucene_escape_neutralises_query_syntax() -> None:
    assert lucene_escape("C++") == r"C\+\+"
    assert lucene_escape('"') == r"\""
    assert lucene_escape("foo:bar") == r"foo\:bar"
    assert lucene_escape("AND") == r"\AND"
    assert lucene_escape("OR") == r"\OR"
    assert lucene_escape("and") == "and"  # lowercase is not an operator
    assert lucene_escape("*") == r"\*"
    assert lucene_escape(r"a\b") == r"a\\b"
    assert lucene_escape("(x)[y]{z}^~?!/&|-") == r"\(x\)\[y\]\{z\}\^\~\?\!\/\&\|\-"
    assert lucene_terms('  "  *  ++ ') == []
    assert lucene_terms("") == []
    assert lucene_terms("AND OR and") == [r"\AND", r"\OR"]  # case-insensitive duplicates dropped
    assert lucene_terms("C++ foo:bar") == [r"C\+\+", r"foo\:bar"]
    assert len(lucene_terms(" ".join(f"w{i}" for i in range(100)))) == 32
    assert all(len(t) <= 64 * 2 for t in lucene_terms("x" * 5000))


def test_iso_utc_normalises_dates_and_offsets() -> None:
    assert iso_utc("2024-01-01") == T0
    assert iso_utc("2024-01-01T01:00:00+01:00") == T0
    assert iso_utc("2024-01-01T00:00:00Z") == T0
    assert iso_utc("2024-01-01T00:00:00") == T0
    assert iso_utc("soon") is None
    assert iso_utc(None) is None


async def test_hostile_queries_are_searched_literally(store: Neo4jGraphStore) -> None:
    u = user()
    m = mem(u, "stack")
    await write(store, m, rel("Alice", "codes_in", "C++"), rel("Alice", "uses", "foo:bar config"),
                rel("Alice", "likes", "salt", "Alice likes salt and pepper"))
    groups = ["global"]
    assert "Alice codes in C++" in facts(await store.reads.search_facts(u, groups, "C++", 10))
    assert "Alice uses foo:bar config" in facts(await store.reads.search_facts(u, groups, "foo:bar", 10))
    assert "Alice likes salt and pepper" in facts(await store.reads.search_facts(u, groups, "AND OR", 10))
    for hostile in ['"', "*", "", "   ", "+-&|!(){}[]^~?:\\/", '"unterminated', "foo:", "NOT", "(", "\\"]:
        found = await store.reads.search_facts(u, groups, hostile, 10)
        assert all(0 <= f.score <= 1 for f in found)
    assert await store.reads.search_facts(u, groups, "*", 10) == []  # no match-all
    assert await store.reads.search_facts(u, groups, '"', 10) == []
    long_query = "alice " * 1000
    assert await store.reads.search_facts(u, groups, long_query, 10)


# ---- search ---------------------------------------------------------------------------------


async def test_search_by_name_alias_and_fact_text(store: Neo4jGraphStore) -> None:
    u = user()
    m = mem(u, "facts")
    await write(store, m, rel("Alice", "uses_database", "PostgreSQL"),
                rel("billing", "runs_on", "Kubernetes", "The billing service is redeployed every friday"))
    # an alias that is not just another casing (as entity resolution would add)
    pg = entity_id(u, "global", "PostgreSQL")
    await store.executor.driver.execute_query(
        "MATCH (e:Entity {id: $id}) SET e.aliases = e.aliases + 'pgsql'", id=pg, database_=store.executor.database
    )
    by_name = await store.reads.search_facts(u, ["global"], "alice", 10)
    assert facts(by_name)[0] == "Alice uses database PostgreSQL"
    assert by_name[0].source == "Alice" and by_name[0].target == "PostgreSQL"
    assert by_name[0].predicate == "uses_database" and by_name[0].group_id == "global"
    assert by_name[0].memory_ids == [m.id] and by_name[0].valid_at == T0
    assert 0 < by_name[0].score <= 1
    by_alias = await store.reads.search_facts(u, ["global"], "pgsql", 10)
    assert facts(by_alias) == ["Alice uses database PostgreSQL"]
    by_fact = await store.reads.search_facts(u, ["global"], "friday", 10)
    assert facts(by_fact) == ["The billing service is redeployed every friday"]
    # exact case-insensitive name, with punctuation the analyzer would split
    assert facts(await store.reads.search_facts(u, ["global"], "  postgresql ",
                                                10))[0] == "Alice uses database PostgreSQL"
    assert await store.reads.search_facts(u, ["global"], "nothing-like-this", 10) == []
    assert len(await store.reads.search_facts(u, ["global"], "alice billing friday", 1)) == 1


async def test_one_hop_neighbours_rank_below_direct_hits(store: Neo4jGraphStore) -> None:
    u = user()
    m = mem(u, "graph")
    await write(store, m, rel("Alice", "works_at", "Acme"), rel("Alice", "likes", "tea"),
                rel("Acme", "located_in", "Berlin"), rel("Berlin", "is_in", "Germany"))
    found = {f.fact: f.score for f in await store.reads.search_facts(u, ["global"], "Alice", 10)}
    assert set(found) == {"Alice works at Acme", "Alice likes tea", "Acme located in Berlin"}  # two hops: no
    assert found["Acme located in Berlin"] < min(found["Alice works at Acme"], found["Alice likes tea"])
    ranked = await store.reads.search_facts(u, ["global"], "Alice", 10)
    assert ranked == sorted(ranked, key=lambda f: -f.score)
    assert all(0 < f.score <= 1 for f in ranked)


async def test_more_support_and_both_ends_matching_rank_higher(store: Neo4jGraphStore) -> None:
    u = user()
    m1, m2 = mem(u, "one"), mem(u, "two")
    await store.memories.upsert_memories([m1, m2], [links(m1, rel("Alice", "likes", "tea"), rel("Alice", "likes",
                                                                                                "coffee")),
                                           links(m2, rel("Alice", "likes", "tea"))])
    ranked = await store.reads.search_facts(u, ["global"], "Alice", 10)
    assert facts(ranked) == ["Alice likes tea", "Alice likes coffee"]
    both = await store.reads.search_facts(u, ["global"], "Alice coffee", 10)
    assert facts(both)[0] == "Alice likes coffee"


async def test_groups_and_users_are_isolated(store: Neo4jGraphStore) -> None:
    u, other = user(), user()
    await write(store, mem(u, "g"), rel("Alice", "uses", "vim"))
    await write(store, mem(u, "x", project="x"), rel("Alice", "uses", "emacs"))
    await write(store, mem(u, "y", project="y"), rel("Alice", "uses", "nano"))
    await write(store, mem(other, "g"), rel("Alice", "uses", "ed"))
    assert facts(await store.reads.search_facts(u, ["global"], "Alice", 10)) == ["Alice uses vim"]
    assert sorted(facts(await store.reads.search_facts(u, ["global", "project--x"], "Alice", 10))) == [
        "Alice uses emacs", "Alice uses vim"]
    assert facts(await store.reads.search_facts(u, ["project--y"], "alice", 10)) == ["Alice uses nano"]
    assert facts(await store.reads.search_facts(other, ["global", "project--x"], "Alice uses", 10)) == ["Alice uses ed"]
    assert await store.reads.search_facts(u, [], "Alice", 10) == []
    assert await store.reads.search_facts(user(), ["global"], "Alice", 10) == []
    by_fact = await store.reads.search_facts(u, ["project--x"], "emacs", 10)
    assert [(f.fact, f.group_id) for f in by_fact] == [("Alice uses emacs", "project--x")]


async def test_history_does_not_crowd_out_current_facts(store: Neo4jGraphStore) -> None:
    """Expired edges are excluded inside Lucene, before the index applies its limit."""
    u = user()
    old = [mem(u, f"old {i}") for i in range(60)]
    await store.memories.upsert_memories(old, [links(m, rel(f"Thing{i}", "mentions", "zebra", "zebra zebra zebra"))
                                      for i, m in enumerate(old)])
    assert len(await store.memories.remove_memories([m.id for m in old], NOW)) == 60
    await write(store, mem(u, "new"), rel("Alice", "saw", "animals", "Alice saw a zebra at the zoo"))
    assert facts(await store.reads.search_facts(u, ["global"], "zebra", 5)) == ["Alice saw a zebra at the zoo"]
    history = await store.reads.search_facts(u, ["global"], "zebra", 100, include_history=True)
    assert len(history) == 61 and all(f.expired_at for f in history if f.fact == "zebra zebra zebra")


# ---- newer fact replaces older -------------------------------------------------------------


async def test_single_valued_fact_replaces_older_and_history_stays(store: Neo4jGraphStore) -> None:
    u = user()
    m1 = await write(store, mem(u, "works at Acme", at=T0), rel("Alice", "works_at", "Acme"))
    m2 = await write(store, mem(u, "works at Globex", at=T1), rel("Alice", "works_at", "Globex"),
                     rel("Alice", "likes", "tea"))
    acme, globex = rid(m1, "Alice", "works_at", "Acme"), rid(m2, "Alice", "works_at", "Globex")
    before = await edges(store, u)
    assert before[acme]["invalid_at"] == before[globex]["valid_at"] == T1
    assert before[acme]["expired_at"] is not None
    assert before[globex]["invalid_at"] is None and before[globex]["expired_at"] is None
    assert before[acme]["memory_ids"] == [m1.id]  # history keeps its support

    current = facts(await store.reads.search_facts(u, ["global"], "Alice", 10))
    assert "Alice works at Globex" in current and "Alice works at Acme" not in current
    history = await store.reads.search_facts(u, ["global"], "Alice", 10, include_history=True)
    assert {"Alice works at Acme", "Alice works at Globex"} <= set(facts(history))
    old = next(f for f in history if f.id == acme)
    assert old.invalid_at == T1 and old.expired_at is not None

    # replays change nothing
    await store.memories.upsert_memories([m1], [links(m1, rel("Alice", "works_at", "Acme"))])
    await store.memories.upsert_memories([m2], [links(m2, rel("Alice", "works_at", "Globex"), rel("Alice", "likes",
                                                                                                  "tea"))])
    assert await edges(store, u) == before

    # a multi-valued predicate is not replaced
    await write(store, mem(u, "likes coffee", at=T2), rel("Alice", "likes", "coffee"))
    after = await edges(store, u)
    assert after[rid(m2, "Alice", "likes", "tea")]["invalid_at"] is None


async def test_retired_by_names_the_memories_whose_facts_replaced_all_of_an_older_ones(
        store: Neo4jGraphStore) -> None:
    u = user()
    lisbon = await write(store, mem(u, "I live in Lisbon", at=T0), rel("User", "lives_in", "Lisbon"))
    mixed = await write(store, mem(u, "I work at Acme and like tea", at=T0), rel("User", "works_at", "Acme"),
                        rel("User", "likes", "tea"))
    porto = await write(store, mem(u, "we moved to Porto", at=T1), rel("User", "lives_in", "Porto"))
    globex = await write(store, mem(u, "I work at Globex now", at=T1), rel("User", "works_at", "Globex"))
    ids = [lisbon.id, mixed.id, porto.id, globex.id]
    # Lisbon's only fact is retired by Porto's; Acme's memory still says "likes tea": not retired
    assert await store.reads.retired_by(u, ["global"], ids) == {lisbon.id: {porto.id}}
    assert await store.reads.retired_by(u, ["project--x"], ids) == {}
    assert await store.reads.retired_by(user(), ["global"], ids) == {}


async def test_out_of_order_older_fact_is_the_one_invalidated(store: Neo4jGraphStore) -> None:
    u = user()
    m2 = await write(store, mem(u, "works at Globex", at=T1), rel("Alice", "works_at", "Globex"))
    m1 = await write(store, mem(u, "works at Acme", at=T0), rel("Alice", "works_at", "Acme"))
    acme, globex = rid(m1, "Alice", "works_at", "Acme"), rid(m2, "Alice", "works_at", "Globex")
    state = await edges(store, u)
    assert state[acme]["valid_at"] == T0 and state[acme]["invalid_at"] == T1 and state[acme]["expired_at"]
    assert state[globex]["invalid_at"] is None and state[globex]["expired_at"] is None
    for m, r in ((m1, rel("Alice", "works_at", "Acme")), (m2, rel("Alice", "works_at", "Globex"))):
        await store.memories.upsert_memories([m], [links(m, r)])
    assert await edges(store, u) == state


async def test_stated_valid_at_wins_and_a_fact_can_come_back(store: Neo4jGraphStore) -> None:
    u = user()
    m1 = await write(store, mem(u, "a", at=T2), rel("Alice", "lives_in", "Paris", valid_at="2020-05-01"))
    m2 = await write(store, mem(u, "b", at=T2), rel("Alice", "lives_in", "Rome", valid_at="2022-05-01"))
    paris, rome = rid(m1, "Alice", "lives_in", "Paris"), rid(m2, "Alice", "lives_in", "Rome")
    state = await edges(store, u)
    assert state[paris]["invalid_at"] == "2022-05-01T00:00:00+00:00"
    # moving back to Paris later: the same edge lives again from the new time, Rome ends then
    m3 = await write(store, mem(u, "c", at=T2), rel("Alice", "lives_in", "Paris", valid_at="2024-03-01"))
    state = await edges(store, u)
    assert state[paris]["valid_at"] == "2024-03-01T00:00:00+00:00"
    assert state[paris]["invalid_at"] is None and state[paris]["expired_at"] is None
    assert state[paris]["memory_ids"] == [m1.id, m3.id]
    assert state[rome]["invalid_at"] == "2024-03-01T00:00:00+00:00"
    # a replay of the old statement does not resurrect anything
    await store.memories.upsert_memories([m2], [links(m2, rel("Alice", "lives_in", "Rome", valid_at="2022-05-01"))])
    assert await edges(store, u) == state


# ---- update re-ingestion -------------------------------------------------------------------


async def test_replace_memory_invalidates_what_it_no_longer_says(store: Neo4jGraphStore) -> None:
    u = user()
    m1, m2 = mem(u, "old content"), mem(u, "tea")
    await store.memories.upsert_memories([m1, m2], [
        links(m1, rel("Alice", "likes", "tea"), rel("Alice", "uses", "vim"), rel("Alice", "owns", "cat"),
              rel("Alice", "works_at", "Acme")),
        links(m2, rel("Alice", "likes", "tea")),
    ])
    tea, vim = rid(m1, "Alice", "likes", "tea"), rid(m1, "Alice", "uses", "vim")
    cat, acme = rid(m1, "Alice", "owns", "cat"), rid(m1, "Alice", "works_at", "Acme")
    updated = m1.model_copy(update={"content": "new content", "hash": content_hash("new content"), "updated_at": NOW})
    new_links = links(updated, rel("Alice", "owns", "cat"), rel("Alice", "uses", "emacs"),
                      rel("Alice", "works_at", "Globex"))
    invalidated = await store.memories.replace_memory(updated, new_links, NOW)
    assert invalidated == sorted([vim, acme])
    state = await edges(store, u)
    assert state[tea]["invalid_at"] is None and state[tea]["memory_ids"] == [m2.id]  # other support keeps it
    assert state[vim]["invalid_at"] == state[vim]["expired_at"] == NOW and state[vim]["memory_ids"] == []
    assert state[cat]["invalid_at"] is None and state[cat]["memory_ids"] == [m1.id]  # restated
    assert state[acme]["invalid_at"] == NOW
    globex, emacs = rid(m1, "Alice", "works_at", "Globex"), rid(m1, "Alice", "uses", "emacs")
    assert state[globex]["valid_at"] == NOW and state[globex]["invalid_at"] is None
    assert state[emacs]["memory_ids"] == [m1.id]
    [episode] = [e for e in (await store.reads.list_episodes(u, None, 10, None)).items if e["id"] == m1.id]
    assert episode["content"] == "new content" and episode["updated_at"] == NOW

    # a retry: same answer, nothing changes; a stale replay of the original write changes nothing
    assert await store.memories.replace_memory(updated, new_links, NOW) == invalidated
    assert await edges(store, u) == state
    await store.memories.upsert_memories([m1], [links(m1, rel("Alice", "uses", "vim"))])
    assert await edges(store, u) == state
    [episode] = [e for e in (await store.reads.list_episodes(u, None, 10, None)).items if e["id"] == m1.id]
    assert episode["content"] == "new content"


# ---- delete and dedup ----------------------------------------------------------------------


async def test_remove_memories_expires_only_unsupported_edges(store: Neo4jGraphStore) -> None:
    u = user()
    m1, m2 = mem(u, "one"), mem(u, "two")
    await store.memories.upsert_memories([m1, m2], [
        links(m1, rel("Alice", "uses", "vim"), rel("Alice", "likes", "tea")),
        links(m2, rel("Alice", "likes", "tea")),
    ])
    vim, tea = rid(m1, "Alice", "uses", "vim"), rid(m1, "Alice", "likes", "tea")
    assert await probe.count_memories(store, u) == 2
    assert await store.memories.remove_memories([m1.id], NOW) == [vim]
    state = await edges(store, u)
    assert state[vim]["expired_at"] == NOW and state[vim]["invalid_at"] is None and state[vim]["memory_ids"] == []
    assert state[tea]["expired_at"] is None and state[tea]["memory_ids"] == [m2.id]
    assert await probe.count_memories(store, u) == 1
    episodes = {e["id"]: e for e in (await store.reads.list_episodes(u, None, 10, None)).items}
    assert episodes[m1.id]["deleted_at"] == NOW and episodes[m2.id]["deleted_at"] is None
    assert facts(await store.reads.search_facts(u, ["global"], "Alice", 10)) == ["Alice likes tea"]

    # idempotent: same answer, and a later retry does not move the timestamps
    assert await store.memories.remove_memories([m1.id], NOW) == [vim]
    assert await store.memories.remove_memories([m1.id], "2027-01-01T00:00:00+00:00") == []
    assert await edges(store, u) == state
    episodes = {e["id"]: e for e in (await store.reads.list_episodes(u, None, 10, None)).items}
    assert episodes[m1.id]["deleted_at"] == NOW
    # a replayed write of a deleted memory supports nothing again
    await store.memories.upsert_memories([m1], [links(m1, rel("Alice", "uses", "vim"), rel("Alice", "likes", "tea"))])
    assert await edges(store, u) == state
    assert await probe.count_memories(store, u) == 1
    # unknown ids are fine
    assert await store.memories.remove_memories([str(uuid.uuid4())], NOW) == []


async def test_dedup_keeps_shared_edges_and_expires_the_duplicates_own(store: Neo4jGraphStore) -> None:
    u = user()
    keep, dup = mem(u, "likes tea"), mem(u, "Likes tea!")
    await store.memories.upsert_memories([keep, dup], [
        links(keep, rel("Alice", "likes", "tea")),
        links(dup, rel("Alice", "likes", "tea"), rel("Alice", "drinks", "it hot")),
    ])
    tea, hot = rid(keep, "Alice", "likes", "tea"), rid(keep, "Alice", "drinks", "it hot")
    assert await store.memories.remove_memories([dup.id], NOW, {dup.id: keep.id}) == [hot]
    state = await edges(store, u)
    assert state[tea]["memory_ids"] == [keep.id] and state[tea]["expired_at"] is None
    assert state[hot]["memory_ids"] == [] and state[hot]["expired_at"] == NOW
    episodes = {e["id"]: e for e in (await store.reads.list_episodes(u, None, 10, None)).items}
    assert episodes[dup.id]["duplicate_of"] == keep.id and episodes[dup.id]["deleted_at"] == NOW
    assert await store.memories.remove_memories([dup.id], NOW, {dup.id: keep.id}) == [hot]
    assert await edges(store, u) == state
    # the survivor's own deletion later expires the shared one too
    assert await store.memories.remove_memories([keep.id], NOW) == [tea]


# ---- listings ------------------------------------------------------------------------------


async def _all_pages(fetch: Any, limit: int) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    cursor: str | None = None
    for _ in range(100):
        page = await fetch(limit, cursor)
        assert len(page.items) <= limit
        items += page.items
        cursor = page.next_cursor
        if cursor is None:
            return items
    raise AssertionError("paging did not end")


async def test_paging_covers_everything_exactly_once(store: Neo4jGraphStore) -> None:
    u = user()
    ms = [mem(u, f"fact {i}", project="p" if i % 3 == 0 else None) for i in range(17)]
    await store.memories.upsert_memories(ms, [links(m, rel(f"Entity{i}", "relates_to", f"Other{i}")) for i,
                                              m in enumerate(ms)])
    await write(store, mem(u, "a", at=T0), rel("Alice", "works_at", "Acme"))
    await write(store, mem(u, "b", at=T1), rel("Alice", "works_at", "Globex"))

    for limit in (1, 4, 7, 500):
        nodes = await _all_pages(lambda n, c: store.reads.list_nodes(u, None, n, c), limit)
        assert len(nodes) == 17 * 2 + 3 and len({n["id"] for n in nodes}) == len(nodes)
        assert [n["id"] for n in nodes] == sorted(str(n["id"]) for n in nodes)
        assert set(nodes[0]) == {"id", "name", "type", "aliases", "roles", "group_id", "created_at", "merged_into",
                                 "merged_at", "resolution_action", "resolution_score", "resolution_match_type",
                                 "resolution_reason"}

        current = await _all_pages(lambda n, c: store.reads.list_edges(u, None, n, c), limit)
        assert len(current) == 17 + 1 and len({e["id"] for e in current}) == len(current)
        history = await _all_pages(lambda n, c: store.reads.list_edges(u, None, n, c, True), limit)
        assert len(history) == 17 + 2
        assert {"source", "target", "source_id", "target_id", "fact", "valid_at", "memory_ids"} <= set(history[0])

        episodes = await _all_pages(lambda n, c: store.reads.list_episodes(u, None, n, c), limit)
        assert len(episodes) == 19 and len({e["id"] for e in episodes}) == 19
        assert {"content", "category", "scope", "group_id", "deleted_at", "duplicate_of"} <= set(episodes[0])

    only_global = await _all_pages(lambda n, c: store.reads.list_nodes(u, ["global"], n, c), 5)
    assert {n["group_id"] for n in only_global} == {"global"} and len(only_global) == 11 * 2 + 3
    project = await _all_pages(lambda n, c: store.reads.list_edges(u, ["project--p"], n, c), 2)
    assert len(project) == 6 and {e["group_id"] for e in project} == {"project--p"}
    assert (await store.reads.list_episodes(u, ["project--q"], 10, None)).items == []
    assert (await store.reads.list_nodes(user(), None, 10, None)) .items == []


async def test_upsert_twice_is_a_no_op(store: Neo4jGraphStore) -> None:
    u = user()
    m = mem(u, "x")
    lk = links(m, rel("Alice", "works_at", "Acme"), rel("alice", "likes", "Tea"),
               entities=[EntityRef("Alice", "person"), EntityRef("ALICE", "person")])
    await store.memories.upsert_memories([m], [lk])
    first = (await probe.entities(store, u), await edges(store, u), await probe.count_memories(store, u))
    await store.memories.upsert_memories([m], [lk])
    assert (await probe.entities(store, u), await edges(store, u), await probe.count_memories(store, u)) == first
    alice = next(e for e in first[0] if e["name"] == "Alice")
    assert alice["aliases"] == ["ALICE", "alice"] and alice["type"] == "person"


# ---- scale ---------------------------------------------------------------------------------


async def _drop_user(store: Neo4jGraphStore, user_id: str) -> None:
    """Test cleanup only (the store itself never deletes): keeps the shared test database small."""
    async with store.executor.session() as session:
        for stmt in (
            "MATCH ()-[r:RELATES]->() WHERE r.user_id = $u CALL (r) { DELETE r } IN TRANSACTIONS OF 2000 ROWS",
            "MATCH (n:Memory|Entity) WHERE n.user_id = $u CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 500 ROWS",
        ):
            await (await session.run(stmt, u=user_id)).consume()


async def test_search_at_ten_thousand_edges_finds_the_exact_fact(store: Neo4jGraphStore) -> None:
    u = user()
    try:
        await _search_at_scale(store, u)
    finally:
        await _drop_user(store, u)


async def _search_at_scale(store: Neo4jGraphStore, u: str) -> None:
    ms = [mem(u, f"batch {i}") for i in range(200)]
    for start in range(0, 200, 50):
        chunk = ms[start : start + 50]
        await store.memories.upsert_memories(chunk, [
            links(m, *[rel("Alice", "knows", f"topic{i * 50 + j}", f"Alice knows topic{i * 50 + j} well")
                       for j in range(50)])
            for i, m in enumerate(chunk, start)
        ])
    assert len((await store.reads.list_edges(u, None, 500, None)).items) == 500
    # Speed at this size is measured by scripts/bench/search.py, not asserted here.
    for query in ("topic4242", "Alice", "knows well", "Alice topic7", "nothing"):
        found = await store.reads.search_facts(u, ["global"], query, 10)
        assert len(found) <= 10
        if query == "topic4242":
            assert found[0].fact == "Alice knows topic4242 well"
        if query == "nothing":
            assert found == []
