"""Ambiguous names through the real graph store (real Neo4j, the real gate, all-MiniLM-L6-v2 for the names): a name that
matches several entities alike gets a pending pair to each and merges into none; a spelling the graph holds
under a specific type is not merged with a generic mention of it, the pair is proposed instead."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from scripts.bench import graph_probe as probe
from service.core.domain import Memory, Scope, content_hash
from service.stores.graph import EntityRef, MemoryLinks
from service.stores.neo4j.rows import entity_id
from service.stores.neo4j.store import Neo4jGraphStore
from tests.conftest import gated_graph_store

T0 = "2026-01-01T00:00:00+00:00"


@pytest.fixture(scope="module")
async def store() -> AsyncIterator[Neo4jGraphStore]:
    async with gated_graph_store() as s:
        yield s


async def say(store: Neo4jGraphStore, user_id: str, *entities: tuple[str, str]) -> Memory:
    text = "note: " + ", ".join(n for n, _ in entities) + f" {uuid.uuid4().hex[:6]}"
    m = Memory(id=str(uuid.uuid4()), user_id=user_id, content=text, category="personal_fact", scope=Scope.GLOBAL,
               project_id=None, hash=content_hash(text), created_at=T0, updated_at=T0)
    await store.memories.upsert_memories([m], [MemoryLinks(m.id, [EntityRef(n, t) for n, t in entities])])
    return m


async def test_an_ambiguous_name_gets_a_pending_pair_to_each_match(store: Neo4jGraphStore) -> None:
    u = f"amb-{uuid.uuid4().hex[:12]}"
    await say(store, u, ("Chris Evans", "person"), ("Chris Pratt", "person"))
    m = await say(store, u, ("Chris", "person"))
    chris = entity_id(u, "global", "Chris")
    assert (await store.reads.mentions_of(u, [m.id]))[m.id] == [chris]  # its own node: merged into neither
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert sorted((r["source"]["name"], r["target"]["name"]) for r in rows) == [
        ("Chris", "Chris Evans"), ("Chris", "Chris Pratt")]
    assert all("ambiguous" in r["pair"]["reason"] for r in rows)
    node = next(n for n in (await store.reads.list_nodes(u, None, 10, None)).items if n["name"] == "Chris")
    assert node["resolution_action"] == "pending" and "ambiguous" in str(node["resolution_reason"])


async def test_a_single_match_is_one_pending_pair(store: Neo4jGraphStore) -> None:  # the negative of the above
    u = f"amb-{uuid.uuid4().hex[:12]}"
    await say(store, u, ("Chris Evans", "person"), ("Kubernetes", "tool"))
    await say(store, u, ("Chris", "person"))
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert [(r["source"]["name"], r["target"]["name"]) for r in rows] == [("Chris", "Chris Evans")]
    assert "ambiguous" not in rows[0]["pair"]["reason"]


async def test_a_generic_mention_of_a_typed_name_is_proposed_not_merged(store: Neo4jGraphStore) -> None:
    u = f"gen-{uuid.uuid4().hex[:12]}"
    await say(store, u, ("Mercury", "tool"))
    m = await say(store, u, ("Mercury", "thing"))
    found = {(n["name"], n["type"]) for n in await probe.entities(store, u)}
    assert found == {("Mercury", "tool"), ("Mercury", "thing")}
    assert entity_id(u, "global", "Mercury") not in (await store.reads.mentions_of(u, [m.id]))[m.id]
    rows, _ = await store.curation.list_duplicates(u, None, 10, None)
    assert len(rows) == 1 and rows[0]["pair"]["match_type"] == "exact"
    assert (rows[0]["source"]["type"], rows[0]["target"]["type"]) == ("thing", "tool")
    again = await say(store, u, ("mercury", "thing"))  # later generic mentions find that node (no third one)
    assert (await store.reads.mentions_of(u, [again.id]))[again.id] == (await store.reads.mentions_of(u, [m.id]))[m.id]


async def test_one_family_keeps_one_node_for_one_spelling(store: Neo4jGraphStore) -> None:
    u = f"gen-{uuid.uuid4().hex[:12]}"
    first = await say(store, u, ("Mercury", "tool"))
    second = await say(store, u, ("Mercury", "database"))  # another technology type: the same entity
    assert (await store.reads.mentions_of(u, [first.id]))[first.id] == (await store.reads.mentions_of(u,
                                                                                                      [second.id]))[second.id]
    assert (await store.curation.list_duplicates(u, None, 10, None))[0] == []
